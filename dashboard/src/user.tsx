import { useEffect, useMemo, useState } from 'preact/hooks';
import { JOB_STATUSES, isSlotName, isTerminalStatus, type ResultLink } from '../../src/contract/api.js';
import type { Delivery } from '../../src/contract/webhook.js';
import { api, ApiError, session, watchJob, when, type Job, type JobDetail, type JobType, type JsonSchema } from './api';
import { FacePicker } from './faces';

/** A help text with its `code` spans (the catalogue's descriptions are Markdown-like) as <code>. */
export function Prose({ text: t }: { text: string }) {
  return <>{t.split(/`([^`]*)`/).map((part, i) => (i % 2 === 1 ? <code>{part}</code> : part))}</>;
}

/** An error's message for the page (whatever was thrown). */
const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));
/** A form value as text: strings as they are, numbers and booleans as JSON writes them. */
const text = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));

export function Status({ status }: { status: string }) {
  return <span class={`status status-${status}`}>{status}</span>;
}

/** The job's structured progress as a bar (indeterminate when the stage has no percentage). */
export function ProgressBar({ job }: { job: Job }) {
  const p = job.progress;
  if (!p || isTerminalStatus(job.status)) return null;
  const label = `${p.stage}${p.percent === null ? '' : ` ${Math.round(p.percent)}%`}`;
  return (
    <span class="progress">
      {p.percent === null ? (
        <progress aria-label={label} />
      ) : (
        <progress max={100} value={p.percent} aria-label={label} />
      )}{' '}
      <span class="progress-label">{label}</span>
    </span>
  );
}

export function ErrorNote({ error }: { error: string | null }) {
  return error ? (
    <p class="error" role="alert">
      {error}
    </p>
  ) : null;
}

export function SignIn({ onKey }: { onKey: (k: string) => void }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    session.setApiKey(key.trim());
    try {
      await api('/jobs?limit=1');
      onKey(key.trim());
    } catch (err) {
      session.setApiKey(null);
      setError(err instanceof Error ? err.message : String(err));
    }
  };
  return (
    <section class="narrow">
      <h1 tabIndex={-1}>Sign in</h1>
      <p>Paste an API key. It stays in this browser tab only (session storage) and is sent as a Bearer header.</p>
      <form onSubmit={submit}>
        <label for="api-key">API key</label>
        <input
          id="api-key"
          name="api-key"
          type="password"
          autoComplete="off"
          required
          value={key}
          onInput={(e) => setKey(e.currentTarget.value)}
        />
        <button type="submit">Sign in</button>
      </form>
      <ErrorNote error={error} />
    </section>
  );
}

function useJobTypes(): JobType[] {
  const [types, setTypes] = useState<JobType[]>([]);
  useEffect(() => {
    api<{ job_types: JobType[] }>('/job-types').then(
      (d) => setTypes(d.job_types),
      () => {},
    );
  }, []);
  return types;
}

const PAGE = 20;

export function Jobs() {
  const types = useJobTypes();
  const [status, setStatus] = useState('');
  const [jobType, setJobType] = useState('');
  // Cursors of the pages before this one, so "Previous" works without counting rows.
  const [cursors, setCursors] = useState<Array<string | undefined>>([undefined]);
  const [page, setPage] = useState<{ jobs: Job[]; next_cursor: string | null } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const cursor = cursors[cursors.length - 1];

  useEffect(() => {
    let stop = false;
    const load = async () => {
      const q = new URLSearchParams({ limit: String(PAGE) });
      if (status) q.set('status', status);
      if (jobType) q.set('job_type', jobType);
      if (cursor) q.set('cursor', cursor);
      try {
        const data = await api<{ jobs: Job[]; next_cursor: string | null }>(`/jobs?${q}`);
        if (!stop) {
          setPage(data);
          setError(null);
        }
      } catch (err) {
        if (!stop) setError(err instanceof Error ? err.message : String(err));
      }
    };
    void load();
    // Live: the page is read again every 3 s while the tab is visible (one request, one page).
    const timer = setInterval(() => document.visibilityState === 'visible' && void load(), 3000);
    return () => {
      stop = true;
      clearInterval(timer);
    };
  }, [status, jobType, cursor]);

  const filter = (set: (v: string) => void) => (e: Event) => {
    set((e.currentTarget as HTMLSelectElement).value);
    setCursors([undefined]);
  };
  return (
    <section>
      <h1 tabIndex={-1}>Jobs</h1>
      <form class="filters" onSubmit={(e) => e.preventDefault()}>
        <div>
          <label for="filter-status">Status</label>
          <select id="filter-status" value={status} onChange={filter(setStatus)}>
            <option value="">any</option>
            {JOB_STATUSES.map((s) => (
              <option value={s}>{s}</option>
            ))}
          </select>
        </div>
        <div>
          <label for="filter-type">Job type</label>
          <select id="filter-type" value={jobType} onChange={filter(setJobType)}>
            <option value="">any</option>
            {types.map((t) => (
              <option value={t.name}>{t.name}</option>
            ))}
          </select>
        </div>
      </form>
      <ErrorNote error={error} />
      <table>
        <caption class="visually-hidden">Your jobs, newest first</caption>
        <thead>
          <tr>
            <th scope="col">Job</th>
            <th scope="col">Type</th>
            <th scope="col">Status</th>
            <th scope="col">Detail</th>
            <th scope="col">Created</th>
          </tr>
        </thead>
        <tbody>
          {page?.jobs.map((j) => (
            <tr data-uuid={j.uuid}>
              <td>
                <a href={`#/jobs/${j.uuid}`} class="mono">
                  {j.uuid.slice(0, 8)}
                </a>
              </td>
              <td>{j.job_type}</td>
              <td>
                <Status status={j.status} />
                {j.error_type && <span class="error-type">{j.error_type}</span>}
              </td>
              <td>
                {j.error_message ?? j.status_detail}
                {j.progress && !isTerminalStatus(j.status) && (
                  <>
                    <br />
                    <ProgressBar job={j} />
                  </>
                )}
              </td>
              <td>{when(j.created_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {page && page.jobs.length === 0 && (
        <p>
          No jobs here yet. <a href="#/new">Submit one</a>.
        </p>
      )}
      <nav class="pager" aria-label="Pages">
        <button
          type="button"
          class="secondary"
          disabled={cursors.length < 2}
          onClick={() => setCursors(cursors.slice(0, -1))}
        >
          Previous page
        </button>
        <span aria-live="polite">Page {cursors.length}</span>
        <button
          type="button"
          class="secondary"
          disabled={!page?.next_cursor}
          onClick={() => page?.next_cursor && setCursors([...cursors, page.next_cursor])}
        >
          Next page
        </button>
      </nav>
    </section>
  );
}

/**
 * A preview of media this service serves (a result on its own origin), or nothing. The page never
 * makes the browser fetch a URL a client supplied (the CSP's img-src and media-src are 'self'):
 * inputs are plain links, and results stored elsewhere (S3) get only their download link.
 */
function Media({ url, kind, label }: { url: string; kind: string; label: string }) {
  if (new URL(url, location.href).origin !== location.origin)
    return <p class="hint">No preview here (the file is on another address): use the link.</p>;
  if (kind.startsWith('image')) return <img src={url} alt={label} loading="lazy" />;
  if (kind.startsWith('video')) return <video src={url} controls preload="metadata" aria-label={label} />;
  if (kind.startsWith('audio')) return <audio src={url} controls preload="metadata" aria-label={label} />;
  return null;
}

interface Step {
  at: string;
  what: string;
}

export function JobPage({ uuid }: { uuid: string }) {
  const types = useJobTypes();
  const [job, setJob] = useState<JobDetail | null>(null);
  const [steps, setSteps] = useState<Step[]>([]);
  const [result, setResult] = useState<ResultLink | null>(null);
  const [deliveries, setDeliveries] = useState<Delivery[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const loadDeliveries = () =>
    api<{ deliveries: Delivery[] }>(`/jobs/${uuid}/webhook-deliveries`).then(
      (d) => setDeliveries(d.deliveries),
      () => {},
    );

  useEffect(() => {
    const ctrl = new AbortController();
    api<JobDetail>(`/jobs/${uuid}`).then(
      (detail) => {
        setJob(detail);
        // Live: every change seen while this page is open, stamped when it was seen. The state
        // the page opened with is not a step (created, started and finished carry their own
        // times), nor is the terminal state (its line is "finished", at finished_at).
        let last = `${detail.status}: ${detail.status_detail}`;
        void watchJob(
          uuid,
          (j, kind) => {
            setJob((prev) => (prev ? { ...prev, ...j } : prev));
            const what = `${j.status}: ${j.status_detail}`;
            if (what !== last && !isTerminalStatus(j.status))
              setSteps((s) => [...s, { at: new Date().toISOString(), what }]);
            last = what;
            if (kind === 'status' && isTerminalStatus(j.status)) void loadDeliveries();
          },
          ctrl.signal,
        );
      },
      (err: unknown) =>
        setError(err instanceof ApiError && err.status === 404 ? 'No such job (or not yours).' : errorText(err)),
    );
    void loadDeliveries();
    return () => ctrl.abort();
  }, [uuid]);

  useEffect(() => {
    if (job?.result_ready && !result)
      api<ResultLink>(`/jobs/${uuid}/result`).then(setResult, (e: unknown) => setError(errorText(e)));
  }, [job?.result_ready]);

  // Deliveries move on their own schedule (retries): refresh while one is pending.
  useEffect(() => {
    if (!deliveries.some((d) => d.state === 'pending')) return;
    const t = setTimeout(() => void loadDeliveries(), 1000);
    return () => clearTimeout(t);
  }, [deliveries]);

  const cancel = async () => {
    setBusy(true);
    try {
      const j = await api<Job>(`/jobs/${uuid}/cancel`, { method: 'POST' });
      setJob((prev) => (prev ? { ...prev, ...j } : prev));
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  const remove = async () => {
    if (!confirm("Delete this job's data (result, input, webhook)? This cannot be undone.")) return;
    setBusy(true);
    try {
      const j = await api<Job>(`/jobs/${uuid}`, { method: 'DELETE' });
      setJob((prev) => (prev ? { ...prev, ...j, input: {}, webhook: null } : prev));
      setResult(null);
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  const redeliver = async (eventId: string) => {
    setBusy(true);
    try {
      await api(`/jobs/${uuid}/webhook-deliveries/${eventId}/redeliver`, { method: 'POST' });
      await loadDeliveries();
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };

  if (!job)
    return (
      <section>
        <h1 tabIndex={-1}>Job</h1>
        {error ? <ErrorNote error={error} /> : <p>Loading…</p>}
      </section>
    );
  const type = types.find((t) => t.name === job.job_type);
  const slots = Object.entries(job.input).filter(([k]) => type?.slots[k]);
  const options = Object.entries(job.input).filter(([k]) => !isSlotName(k));
  return (
    <section>
      <h1 tabIndex={-1}>
        Job <span class="mono">{job.uuid}</span>
      </h1>
      <p class="summary">
        <Status status={job.status} />{' '}
        <span id="job-detail" aria-live="polite">
          {job.status_detail}
        </span>{' '}
        · {job.job_type} · {job.model}
        {job.priority !== 0 && ` · priority ${job.priority}`}
        {job.deadline && ` · deadline ${when(job.deadline)}`}
      </p>
      {/* The bar and the buttons on lines of their own: a button never sits against the label. */}
      {job.progress && !isTerminalStatus(job.status) && (
        <div class="job-progress">
          <ProgressBar job={job} />
        </div>
      )}
      <div class="actions">
        {!isTerminalStatus(job.status) && (
          <button type="button" class="danger" onClick={cancel} disabled={busy}>
            Cancel job
          </button>
        )}
        {isTerminalStatus(job.status) && !job.data_removed && (
          <button type="button" class="danger" onClick={remove} disabled={busy}>
            Delete job data
          </button>
        )}
      </div>
      {job.data_removed && (
        <p class="note" role="status">
          This job's data (input, webhook, result) was deleted.
        </p>
      )}
      <ErrorNote error={error} />
      {job.error_message && (
        <div class="error" role="status">
          <strong>{job.error_type}</strong>: {job.error_message}
        </div>
      )}
      <div class="grid">
        <section aria-labelledby="inputs-h">
          <h2 id="inputs-h">Inputs</h2>
          {slots.length > 0 && (
            <dl class="inputs">
              {slots.map(([slot, value]) => (
                <>
                  <dt>{slot}</dt>
                  {[value].flat().map((u) => (
                    <dd>
                      {/* A link only: the browser fetches nothing the client supplied by itself. */}
                      <a class="mono" href={String(u)} rel="noreferrer noopener" target="_blank">
                        {String(u)}
                      </a>
                    </dd>
                  ))}
                </>
              ))}
            </dl>
          )}
          {options.length > 0 && (
            <dl>
              {options.map(([k, v]) => (
                <>
                  <dt>{k}</dt>
                  <dd class="mono">{JSON.stringify(v)}</dd>
                </>
              ))}
            </dl>
          )}
        </section>
        <section aria-labelledby="result-h">
          <h2 id="result-h">Result</h2>
          {result ? (
            <figure>
              <Media url={result.url} kind={result.content_type} label="result" />
              <figcaption>
                {result.content_type}, {Math.round(result.size_bytes / 1024)} KiB ·{' '}
                <a href={result.url} download>
                  Download result
                </a>
              </figcaption>
            </figure>
          ) : (
            <p>{isTerminalStatus(job.status) ? 'No result.' : 'Not ready yet.'}</p>
          )}
        </section>
      </div>
      <section aria-labelledby="timeline-h">
        <h2 id="timeline-h">Timeline</h2>
        <ol class="timeline">
          <li>
            <time>{when(job.created_at)}</time> created
          </li>
          {job.started_at && (
            <li>
              <time>{when(job.started_at)}</time> started
            </li>
          )}
          {steps.map((s) => (
            <li>
              <time>{when(s.at)}</time> {s.what}
            </li>
          ))}
          {job.finished_at && (
            <li>
              <time>{when(job.finished_at)}</time> finished ({job.status})
            </li>
          )}
        </ol>
      </section>
      <section aria-labelledby="hooks-h">
        <h2 id="hooks-h">Webhook deliveries</h2>
        {job.webhook ? <p class="mono">{job.webhook.url}</p> : <p>This job has no webhook.</p>}
        {deliveries.map((d) => (
          <article class="delivery" data-event={d.event_id}>
            <h3>
              {d.event_type} · <span class={`state-${d.state}`}>{d.state}</span>
            </h3>
            <table>
              <caption class="visually-hidden">Attempts of {d.event_type}</caption>
              <thead>
                <tr>
                  <th scope="col">Attempt</th>
                  <th scope="col">Started</th>
                  <th scope="col">HTTP status</th>
                  <th scope="col">Duration</th>
                  <th scope="col">Outcome</th>
                </tr>
              </thead>
              <tbody>
                {d.attempts.map((a) => (
                  <tr>
                    <td>
                      {a.attempt}
                      {a.manual ? ' (redelivery)' : ''}
                    </td>
                    <td>{when(a.started_at)}</td>
                    <td>{a.http_status ?? '—'}</td>
                    <td>{a.duration_ms} ms</td>
                    <td>{a.ok ? 'ok' : a.error}</td>
                  </tr>
                ))}
              </tbody>
            </table>
            <button type="button" class="secondary" onClick={() => redeliver(d.event_id)} disabled={busy}>
              Redeliver {d.event_type}
            </button>
          </article>
        ))}
      </section>
    </section>
  );
}

const parseList = (t: string): number[] | undefined => {
  const parts = t.split(/[\s,]+/).filter(Boolean);
  return parts.length ? parts.map(Number) : undefined;
};

/** A list of integers (e.g. target_face_indices) typed as "1, 3"; the text is kept while it is typed. */
function NumberListInput(props: {
  id: string;
  described: string | undefined;
  value: unknown;
  onChange: (v: unknown) => void;
}) {
  const shown = Array.isArray(props.value) ? props.value.join(', ') : '';
  const [textValue, setTextValue] = useState(shown);
  // Set from elsewhere (the face picker): show the new value.
  useEffect(() => {
    if (JSON.stringify(parseList(textValue)) !== JSON.stringify(props.value)) setTextValue(shown);
  }, [shown]);
  return (
    <input
      id={props.id}
      type="text"
      inputMode="numeric"
      aria-describedby={props.described}
      placeholder="e.g. 1, 3"
      value={textValue}
      onInput={(e) => {
        setTextValue(e.currentTarget.value);
        props.onChange(parseList(e.currentTarget.value));
      }}
    />
  );
}

/** One form control per option, from its JSON Schema (enum, boolean, number, string). */
function OptionField({
  name,
  schema,
  value,
  onChange,
}: {
  name: string;
  schema: JsonSchema;
  value: unknown;
  onChange: (v: unknown) => void;
}) {
  const id = `opt-${name}`;
  const s = schema.anyOf?.find((x) => x.type !== 'null') ?? schema;
  const type = Array.isArray(s.type) ? s.type.find((t) => t !== 'null') : s.type;
  const hint = schema.description ?? s.description;
  const described = hint ? `${id}-hint` : undefined;
  let control;
  if (s.enum) {
    control = (
      <select
        id={id}
        aria-describedby={described}
        value={value === undefined ? '' : text(value)}
        onChange={(e) => onChange(e.currentTarget.value === '' ? undefined : e.currentTarget.value)}
      >
        <option value="">default{s.default !== undefined ? ` (${text(s.default)})` : ''}</option>
        {s.enum.map((v) => (
          <option value={String(v)}>{String(v)}</option>
        ))}
      </select>
    );
  } else if (type === 'boolean') {
    control = (
      <input
        id={id}
        type="checkbox"
        aria-describedby={described}
        checked={value === undefined ? s.default === true : value === true}
        onChange={(e) => onChange(e.currentTarget.checked)}
      />
    );
  } else if (type === 'array') {
    control = <NumberListInput id={id} described={described} value={value} onChange={onChange} />;
  } else if (type === 'integer' || type === 'number') {
    control = (
      <input
        id={id}
        type="number"
        aria-describedby={described}
        min={s.minimum}
        max={s.maximum}
        step={type === 'integer' ? 1 : 'any'}
        placeholder={s.default !== undefined ? text(s.default) : ''}
        value={value === undefined ? '' : text(value)}
        onInput={(e) => onChange(e.currentTarget.value === '' ? undefined : Number(e.currentTarget.value))}
      />
    );
  } else {
    control = (
      <input
        id={id}
        type="text"
        aria-describedby={described}
        value={value === undefined ? '' : text(value)}
        onInput={(e) => onChange(e.currentTarget.value === '' ? undefined : e.currentTarget.value)}
      />
    );
  }
  return (
    <div class={type === 'boolean' ? 'field check' : 'field'}>
      <label for={id}>{name}</label>
      {control}
      {hint && (
        <small id={described} class="hint">
          <Prose text={hint} />
        </small>
      )}
    </div>
  );
}

/** The submit body's fields every job type takes (README "Deadlines, priority, retention"), shown under "Advanced". */
const SCHEDULING = ['cancel_after', 'priority', 'retention'] as const;

/** Why picked faces (target_face_indices) would fail the job as the form stands, or null. */
function pickConflict(faces: unknown, reference: string | undefined): string | null {
  if (reference?.trim()) return 'Picked faces cannot be combined with a reference image: clear reference or the picks.';
  if (faces === 'all' || faces === 'reference')
    return `Picked faces cannot be combined with faces "${faces}": set faces to default or clear the picks.`;
  return null;
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
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    if (!type) return;
    setError(null);
    setBusy(true);
    const input: Record<string, unknown> = {};
    for (const [slot, spec] of Object.entries(type.slots)) {
      const urls = (slots[slot] ?? '').split(/\s+/).filter(Boolean);
      if (urls.length === 0) continue;
      input[slot] = spec && spec.max > 1 ? urls : urls[0];
    }
    for (const [k, v] of Object.entries(options)) if (v !== undefined) input[k] = v;
    const body: Record<string, unknown> = { job_type: type.name, model: model || type.models[0]?.name, input };
    if (webhook.trim()) body.webhook = { url: webhook.trim() };
    for (const [k, v] of Object.entries(scheduling)) if (v !== undefined) body[k] = v;
    try {
      const job = await api<Job>(`/jobs/submit/${type.name}`, { method: 'POST', body });
      location.hash = `#/jobs/${job.uuid}`;
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };

  const optionProps = Object.entries(type?.options.properties ?? {});
  // The face pickers detect with the swap's own threshold (the indices depend on it).
  const minConfidenceSchema: JsonSchema | undefined = type?.options.properties?.min_confidence;
  const minConfidence = (options.min_confidence ?? minConfidenceSchema?.default) as number | undefined;
  // Their schemas (ranges, RESULT_RETENTION's bound, help) come from the server's submit body schema.
  const bodyProps = (type?.body_schema as JsonSchema | undefined)?.properties ?? {};
  return (
    <section class="narrow">
      <h1 tabIndex={-1}>New job</h1>
      <form onSubmit={submit}>
        <div class="field">
          <label for="job-type">Job type</label>
          <select
            id="job-type"
            value={type?.name ?? ''}
            onChange={(e) => {
              setTypeName(e.currentTarget.value);
              setModel('');
              setSlots({});
              setOptions({});
            }}
          >
            {types.map((t) => (
              <option value={t.name}>{t.name}</option>
            ))}
          </select>
          {type && (
            <small class="hint">
              <Prose text={type.description} />
            </small>
          )}
        </div>
        {type && (
          <div class="field">
            <label for="model">Model</label>
            <select id="model" value={model || type.models[0]?.name} onChange={(e) => setModel(e.currentTarget.value)}>
              {type.models.map((m) => (
                <option value={m.name}>{m.name}</option>
              ))}
            </select>
            {/* The description under the list, whole: an <option> cuts a long one mid-word. */}
            {type.models
              .filter((m) => m.name === (model || type.models[0]?.name))
              .map((m) => (
                <small class="hint" id="model-description">
                  <Prose text={m.description} />
                </small>
              ))}
          </div>
        )}
        {type && (
          <fieldset>
            <legend>Media</legend>
            {Object.entries(type.slots).map(([slot, spec]) => (
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
                  value={slots[slot] ?? ''}
                  onInput={(e) => setSlots({ ...slots, [slot]: e.currentTarget.value })}
                />
                <small id={`slot-${slot}-hint`} class="hint">
                  <Prose text={spec!.description} />
                </small>
              </div>
            ))}
          </fieldset>
        )}
        {optionProps.length > 0 && (
          <fieldset>
            <legend>Options</legend>
            {type?.options.properties?.target_face_indices && type.slots.target?.accepts === 'image' && (
              <FacePicker
                key={`${type.name} target`}
                slot="target"
                url={((slots as Partial<Record<string, string>>).target ?? '').trim()}
                minConfidence={minConfidence}
                value={options.target_face_indices as number[] | undefined}
                onChange={(v) => setOptions((o) => ({ ...o, target_face_indices: v }))}
                conflict={pickConflict(options.faces, slots.reference)}
              />
            )}
            {type?.options.properties?.source_face_index && type.slots.source?.accepts === 'image' && (
              <FacePicker
                key={`${type.name} source`}
                slot="source"
                url={((slots as Partial<Record<string, string>>).source ?? '').trim()}
                minConfidence={minConfidence}
                value={options.source_face_index === undefined ? undefined : [options.source_face_index as number]}
                onChange={(v) => setOptions((o) => ({ ...o, source_face_index: v?.[0] }))}
                conflict={null}
              />
            )}
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
        <details class="advanced">
          <summary>Advanced: deadline, priority, retention</summary>
          {SCHEDULING.map((name) => {
            const schema = bodyProps[name] as JsonSchema | undefined;
            return (
              schema && (
                <OptionField
                  name={name}
                  schema={schema}
                  value={scheduling[name]}
                  onChange={(v) => setScheduling((o) => ({ ...o, [name]: v }))}
                />
              )
            );
          })}
        </details>
        <button type="submit" disabled={busy || !type}>
          Submit job
        </button>
      </form>
      <ErrorNote error={error} />
    </section>
  );
}
