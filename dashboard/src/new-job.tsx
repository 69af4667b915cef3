import { useMemo, useState } from 'preact/hooks';
import { api, type Job, type JobType, type JsonSchema } from './api';
import { ErrorNote, Prose, useAction, useJobTypes } from './common';
import { FacePicker } from './faces';
import { OptionField } from './option-field';

/** The submit body's fields every job type takes (README "Deadlines, priority, retention"), shown under "Advanced". */
const SCHEDULING = ['cancel_after', 'priority', 'retention'] as const;

interface Form {
  model: string;
  slots: Record<string, string>;
  options: Record<string, unknown>;
  webhook: string;
  scheduling: Record<string, unknown>;
}

/** The submit body the form stands for: URLs split per slot, unset options left out. */
function submitBody(type: JobType, form: Form): Record<string, unknown> {
  const input: Record<string, unknown> = {};
  for (const [slot, spec] of Object.entries(type.slots)) {
    const urls = (form.slots[slot] ?? '').split(/\s+/).filter(Boolean);
    if (urls.length === 0) continue;
    input[slot] = spec && spec.max > 1 ? urls : urls[0];
  }
  for (const [k, v] of Object.entries(form.options)) if (v !== undefined) input[k] = v;
  const body: Record<string, unknown> = { job_type: type.name, model: form.model || type.models[0]?.name, input };
  if (form.webhook.trim()) body.webhook = { url: form.webhook.trim() };
  for (const [k, v] of Object.entries(form.scheduling)) if (v !== undefined) body[k] = v;
  return body;
}

/** Why picked faces (target_face_indices) would fail the job as the form stands, or null. */
function pickConflict(faces: unknown, reference: string | undefined): string | null {
  if (reference?.trim()) return 'Picked faces cannot be combined with a reference image: clear reference or the picks.';
  if (faces === 'all' || faces === 'reference')
    return `Picked faces cannot be combined with faces "${faces}": set faces to default or clear the picks.`;
  return null;
}

function TypeField(props: { types: JobType[]; type: JobType | undefined; onChange: (name: string) => void }) {
  return (
    <div class="field">
      <label for="job-type">Job type</label>
      <select id="job-type" value={props.type?.name ?? ''} onChange={(e) => props.onChange(e.currentTarget.value)}>
        {props.types.map((t) => (
          <option value={t.name}>{t.name}</option>
        ))}
      </select>
      {props.type && (
        <small class="hint">
          <Prose text={props.type.description} />
        </small>
      )}
    </div>
  );
}

function ModelField(props: { type: JobType; model: string; onChange: (name: string) => void }) {
  const chosen = props.model || props.type.models[0]?.name;
  return (
    <div class="field">
      <label for="model">Model</label>
      <select id="model" value={chosen} onChange={(e) => props.onChange(e.currentTarget.value)}>
        {props.type.models.map((m) => (
          <option value={m.name}>{m.name}</option>
        ))}
      </select>
      {/* The description under the list, whole: an <option> cuts a long one mid-word. */}
      {props.type.models
        .filter((m) => m.name === chosen)
        .map((m) => (
          <small class="hint" id="model-description">
            <Prose text={m.description} />
          </small>
        ))}
    </div>
  );
}

function MediaFields(props: {
  type: JobType;
  slots: Record<string, string>;
  onChange: (slots: Record<string, string>) => void;
}) {
  return (
    <fieldset>
      <legend>Media</legend>
      {Object.entries(props.type.slots).map(([slot, spec]) => (
        <div class="field">
          <label for={`slot-${slot}`}>
            {slot} ({spec!.accepts}
            {spec!.max > 1 ? `, up to ${spec!.max} URLs separated by spaces` : ' URL'}
            {spec!.required ? '' : ', optional'})
          </label>
          <input
            id={`slot-${slot}`}
            type="text"
            inputMode="url"
            required={spec!.required}
            aria-describedby={`slot-${slot}-hint`}
            value={props.slots[slot] ?? ''}
            onInput={(e) => props.onChange({ ...props.slots, [slot]: e.currentTarget.value })}
          />
          <small id={`slot-${slot}-hint`} class="hint">
            <Prose text={spec!.description} />
          </small>
        </div>
      ))}
    </fieldset>
  );
}

/** The face pickers of a face-swap type (target faces, source face), above the options they set. */
function FacePickers(props: {
  type: JobType;
  slots: Record<string, string>;
  options: Record<string, unknown>;
  setOptions: (f: (o: Record<string, unknown>) => Record<string, unknown>) => void;
}) {
  const { type, slots, options, setOptions } = props;
  const schemas = type.options.properties;
  // The pickers detect with the swap's own threshold (the indices depend on it).
  const minConfidenceSchema: JsonSchema | undefined = schemas?.min_confidence;
  const minConfidence = (options.min_confidence ?? minConfidenceSchema?.default) as number | undefined;
  const url = (slot: string) => ((slots as Partial<Record<string, string>>)[slot] ?? '').trim();
  return (
    <>
      {schemas?.target_face_indices && type.slots.target?.accepts === 'image' && (
        <FacePicker
          key={`${type.name} target`}
          slot="target"
          url={url('target')}
          minConfidence={minConfidence}
          value={options.target_face_indices as number[] | undefined}
          onChange={(v) => setOptions((o) => ({ ...o, target_face_indices: v }))}
          conflict={pickConflict(options.faces, slots.reference)}
        />
      )}
      {schemas?.source_face_index && type.slots.source?.accepts === 'image' && (
        <FacePicker
          key={`${type.name} source`}
          slot="source"
          url={url('source')}
          minConfidence={minConfidence}
          value={options.source_face_index === undefined ? undefined : [options.source_face_index as number]}
          onChange={(v) => setOptions((o) => ({ ...o, source_face_index: v?.[0] }))}
          conflict={null}
        />
      )}
    </>
  );
}

function SchedulingFields(props: {
  type: JobType;
  values: Record<string, unknown>;
  setValues: (f: (o: Record<string, unknown>) => Record<string, unknown>) => void;
}) {
  // Their schemas (ranges, RESULT_RETENTION's bound, help) come from the server's submit body schema.
  const bodyProps = (props.type.body_schema as JsonSchema | undefined)?.properties ?? {};
  return (
    <details class="advanced">
      <summary>Advanced: deadline, priority, retention</summary>
      {SCHEDULING.map((name) => {
        const schema = bodyProps[name] as JsonSchema | undefined;
        return (
          schema && (
            <OptionField
              name={name}
              schema={schema}
              value={props.values[name]}
              onChange={(v) => props.setValues((o) => ({ ...o, [name]: v }))}
            />
          )
        );
      })}
    </details>
  );
}

export function NewJob() {
  const types = useJobTypes();
  const [typeName, setTypeName] = useState('');
  const type = useMemo(() => types.find((t) => t.name === typeName) ?? types.at(0), [types, typeName]);
  const [model, setModel] = useState('');
  const [slots, setSlots] = useState<Record<string, string>>({});
  const [options, setOptions] = useState<Record<string, unknown>>({});
  const [webhook, setWebhook] = useState('');
  const [scheduling, setScheduling] = useState<Record<string, unknown>>({});
  const [error, setError] = useState<string | null>(null);
  const { busy, run } = useAction(setError);

  const submit = (e: Event) => {
    e.preventDefault();
    if (!type) return;
    setError(null);
    const body = submitBody(type, { model, slots, options, webhook, scheduling });
    void run(async () => {
      const job = await api<Job>(`/jobs/submit/${type.name}`, { method: 'POST', body });
      location.hash = `#/jobs/${job.uuid}`;
    });
  };
  const chooseType = (name: string) => {
    setTypeName(name);
    setModel('');
    setSlots({});
    setOptions({});
  };
  const optionProps = Object.entries(type?.options.properties ?? {});
  return (
    <section class="narrow">
      <h1 tabIndex={-1}>New job</h1>
      <form onSubmit={submit}>
        <TypeField types={types} type={type} onChange={chooseType} />
        {type && <ModelField type={type} model={model} onChange={setModel} />}
        {type && <MediaFields type={type} slots={slots} onChange={setSlots} />}
        {type && optionProps.length > 0 && (
          <fieldset>
            <legend>Options</legend>
            <FacePickers type={type} slots={slots} options={options} setOptions={setOptions} />
            {optionProps.map(([name, schema]) => (
              <OptionField
                name={name}
                schema={schema}
                value={options[name]}
                onChange={(v) => setOptions({ ...options, [name]: v })}
              />
            ))}
          </fieldset>
        )}
        <div class="field">
          <label for="webhook-url">Webhook URL (optional)</label>
          <input id="webhook-url" type="url" value={webhook} onInput={(e) => setWebhook(e.currentTarget.value)} />
        </div>
        {type && <SchedulingFields type={type} values={scheduling} setValues={setScheduling} />}
        <button type="submit" disabled={busy || !type}>
          Submit job
        </button>
      </form>
      <ErrorNote error={error} />
    </section>
  );
}
