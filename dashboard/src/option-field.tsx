import { useEffect, useState } from 'preact/hooks';
import type { JsonSchema } from './api';
import { Prose } from './common';

/** A form value as text: strings as they are, numbers and booleans as JSON writes them. */
const text = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));

const parseList = (t: string): number[] | undefined => {
  const parts = t.split(/[\s,]+/).filter(Boolean);
  return parts.length ? parts.map(Number) : undefined;
};

interface ControlProps {
  id: string;
  described: string | undefined;
  value: unknown;
  onChange: (v: unknown) => void;
}

/** A list of integers (e.g. target_face_indices) typed as "1, 3"; the text is kept while it is typed. */
function NumberListInput(props: ControlProps) {
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

/** The control for one JSON Schema type: enum, boolean, array of integers, number, or text. */
function Control({ s, type, ...p }: ControlProps & { s: JsonSchema; type: string | undefined }) {
  const shown = p.value === undefined ? '' : text(p.value);
  if (s.enum)
    return (
      <select
        id={p.id}
        aria-describedby={p.described}
        value={shown}
        onChange={(e) => p.onChange(e.currentTarget.value === '' ? undefined : e.currentTarget.value)}
      >
        <option value="">default{s.default !== undefined ? ` (${text(s.default)})` : ''}</option>
        {s.enum.map((v) => (
          <option value={String(v)}>{String(v)}</option>
        ))}
      </select>
    );
  if (type === 'boolean')
    return (
      <input
        id={p.id}
        type="checkbox"
        aria-describedby={p.described}
        checked={p.value === undefined ? s.default === true : p.value === true}
        onChange={(e) => p.onChange(e.currentTarget.checked)}
      />
    );
  if (type === 'array') return <NumberListInput {...p} />;
  if (type === 'integer' || type === 'number')
    return (
      <input
        id={p.id}
        type="number"
        aria-describedby={p.described}
        min={s.minimum}
        max={s.maximum}
        step={type === 'integer' ? 1 : 'any'}
        placeholder={s.default !== undefined ? text(s.default) : ''}
        value={shown}
        onInput={(e) => p.onChange(e.currentTarget.value === '' ? undefined : Number(e.currentTarget.value))}
      />
    );
  return (
    <input
      id={p.id}
      type="text"
      aria-describedby={p.described}
      value={shown}
      onInput={(e) => p.onChange(e.currentTarget.value === '' ? undefined : e.currentTarget.value)}
    />
  );
}

/** One form control per option, from its JSON Schema (enum, boolean, number, string). */
export function OptionField(props: {
  name: string;
  schema: JsonSchema;
  value: unknown;
  onChange: (v: unknown) => void;
}) {
  const { name, schema } = props;
  const id = `opt-${name}`;
  const s = schema.anyOf?.find((x) => x.type !== 'null') ?? schema;
  const type = Array.isArray(s.type) ? s.type.find((t) => t !== 'null') : s.type;
  const hint = schema.description ?? s.description;
  const described = hint ? `${id}-hint` : undefined;
  return (
    <div class={type === 'boolean' ? 'field check' : 'field'}>
      <label for={id}>{name}</label>
      <Control s={s} type={type} id={id} described={described} value={props.value} onChange={props.onChange} />
      {hint && (
        <small id={described} class="hint">
          <Prose text={hint} />
        </small>
      )}
    </div>
  );
}
