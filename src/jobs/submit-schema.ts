import { z } from 'zod';
import { checkUrlSyntax, MAX_URL_LENGTH } from '../media/policy.js';
import { type JobType } from '../processors/types.js';
import { SLOT_NAMES, type SlotName } from '../contract/api.js';
import { CANCEL_AFTER_MAX_MS, CANCEL_AFTER_MIN_MS, PRIORITY_MAX, PRIORITY_MIN } from '../contract/api.js';
import { EVENT_TYPES } from '../contract/webhook.js';
import { formatSubmitDuration, parseSubmitDuration } from './durations.js';

/**
 * The submit body schema of one job type, built from its catalogue entry. The same schema
 * validates requests and is rendered to JSON Schema for GET /job-types and OpenAPI.
 */
export interface SchemaOptions {
  allowPrivate: boolean;
  /** RESULT_RETENTION: the longest `retention` a job may ask for (default 7 days). */
  maxRetentionMs?: number;
}

export const DURATION_SYNTAX = 'must be a duration such as "90s", "5m" or "1h30m", or a number of seconds';

export const durationRange = (min: number, max: number) =>
  `must be between ${formatSubmitDuration(min)} and ${formatSubmitDuration(max)}`;

/** A duration field (`cancel_after`, `retention`) between `min` and `max` ms; the message names the bounds. */
export function durationSchema(min: number, max: number, description: string) {
  return z
    .union([z.string().max(32), z.number()], { error: DURATION_SYNTAX })
    .superRefine((v, ctx) => {
      const ms = parseSubmitDuration(v);
      if (ms === undefined) ctx.addIssue({ code: 'custom', message: DURATION_SYNTAX });
      else if (ms < min || ms > max) ctx.addIssue({ code: 'custom', message: durationRange(min, max) });
    })
    .describe(description);
}

/** The optional fields every job type's submit body takes (cancel_after, priority, retention). */
export function schedulingFields(opts: SchemaOptions) {
  const maxRetention = opts.maxRetentionMs ?? 7 * 86_400_000;
  return {
    cancel_after: durationSchema(
      CANCEL_AFTER_MIN_MS,
      CANCEL_AFTER_MAX_MS,
      'Cancel the job if it has not finished this long after submission: "90s", "5m", "1h30m" or a number of seconds (1s to 7d). The header Cancel-After is the same.',
    ).optional(),
    retention: durationSchema(
      1000,
      maxRetention,
      `Purge the job's data (input, webhook, result) this long after it finished; at most RESULT_RETENTION (${formatSubmitDuration(maxRetention)}).`,
    ).optional(),
    priority: z
      .int()
      .min(PRIORITY_MIN)
      .max(PRIORITY_MAX)
      .optional()
      .describe(
        "Seconds (−600..600): among the same owner's queued jobs, taken as if submitted this much earlier. Never changes the order between owners.",
      ),
  };
}

/** Slot schemas, so the JSON Schema renderer can show them as "string or array of strings". */
const slotSchemas = new WeakMap<z.ZodType, { min: number; max: number }>();

function publicUrl(opts: SchemaOptions) {
  // abort: an over-long URL gets this one message, not the policy's as well.
  return z
    .string()
    .max(MAX_URL_LENGTH, { abort: true })
    .superRefine((s, ctx) => {
      const r = checkUrlSyntax(s, { allowPrivate: opts.allowPrivate });
      if (!r.ok) ctx.addIssue({ code: 'custom', message: `must be a public http or https URL (${r.reason})` });
    });
}

function slotSchema(min: number, max: number, description: string, opts: SchemaOptions) {
  // A bare string is one URL; normalising here keeps everything downstream array-shaped.
  const s = z
    .preprocess((v) => (typeof v === 'string' ? [v] : v), z.array(publicUrl(opts)).min(Math.max(1, min)).max(max))
    .describe(description);
  slotSchemas.set(s, { min, max });
  return s;
}

export function webhookSchema(opts: SchemaOptions) {
  return z.strictObject({
    url: publicUrl(opts).describe('Receives a POST for each subscribed terminal event.'),
    secret: z.string().min(1).max(256).optional().describe('When given, deliveries carry X-Service-Signature.'),
    events: z
      .array(z.enum(EVENT_TYPES))
      .min(1)
      .refine((a) => new Set(a).size === a.length, { message: 'must not repeat an event' })
      .optional()
      .describe('Events to deliver; all three when omitted.'),
  });
}

export function submitSchema(type: JobType, opts: SchemaOptions) {
  const slots: Record<string, z.ZodType> = {};
  for (const name of SLOT_NAMES) {
    const spec = type.slots[name];
    if (!spec) continue;
    const s = slotSchema(spec.min, spec.max, spec.description, opts);
    slots[name] = spec.required ? s : s.optional();
  }
  const input = z.strictObject({ ...slots, ...type.options.shape }).superRefine((value, ctx) => {
    const problem = type.checkInput?.(value);
    if (problem) ctx.addIssue({ code: 'custom', path: [problem.field], message: problem.message });
  });
  return z.strictObject({
    job_type: z.literal(type.name).describe('Must equal the {jobType} path segment.'),
    model: z.enum(type.models.map((m) => m.name) as [string, ...string[]]),
    input,
    webhook: webhookSchema(opts).optional(),
    ...schedulingFields(opts),
  });
}

export type SubmitBody = {
  job_type: string;
  model: string;
  input: Record<string, unknown>;
  webhook?: { url: string; secret?: string; events?: (typeof EVENT_TYPES)[number][] };
  cancel_after?: string | number;
  retention?: string | number;
  priority?: number;
};

/** JSON Schema (draft 2020-12) of a zod schema, with media slots shown as string-or-array. */
export function toJsonSchema(schema: z.ZodType, io: 'input' | 'output' = 'input'): Record<string, unknown> {
  return z.toJSONSchema(schema, {
    io,
    unrepresentable: 'any',
    override: (ctx) => {
      const slot = slotSchemas.get(ctx.zodSchema as unknown as z.ZodType);
      if (!slot) return;
      const url = { type: 'string', format: 'uri' };
      for (const k of Object.keys(ctx.jsonSchema)) Reflect.deleteProperty(ctx.jsonSchema, k);
      Object.assign(ctx.jsonSchema, {
        anyOf: [url, { type: 'array', items: url, minItems: Math.max(1, slot.min), maxItems: slot.max }],
        description: (ctx.zodSchema as unknown as z.ZodType).description,
      });
    },
  });
}

/** Field path in the style of the messages: input.source[1]. */
function fieldPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${String(p)}` : String(p);
  return out;
}

const isSlotPath = (path: readonly PropertyKey[]) =>
  path.length === 2 && path[0] === 'input' && (SLOT_NAMES as readonly PropertyKey[]).includes(path[1]!);

/**
 * The message of a failed validation: one sentence per field and rule, the first `max` of them.
 * zod may report one rule twice (an integer past both its own safe range and the field's
 * maximum): the tightest bound is the one the client needs.
 */
export function describeIssues(issues: readonly z.core.$ZodIssue[], input: unknown, max = 3): string {
  const kept = new Map<string, z.core.$ZodIssue>();
  for (const issue of issues) {
    const rule = `${fieldPath(issue.path)}\u0000${issue.code}`;
    const prior = kept.get(rule);
    if (!prior) kept.set(rule, issue);
    else if (issue.code === 'too_big' && prior.code === 'too_big' && Number(issue.maximum) < Number(prior.maximum))
      kept.set(rule, issue);
    else if (issue.code === 'too_small' && prior.code === 'too_small' && Number(issue.minimum) > Number(prior.minimum))
      kept.set(rule, issue);
  }
  const messages = [...new Set([...kept.values()].map((i) => describeIssue(i, input)))];
  return messages.slice(0, max).join('; ');
}

/** One clear sentence per problem, naming the field. */
export function describeIssue(issue: z.core.$ZodIssue, input: unknown): string {
  // A slot given as a bare string was normalised to an array of one: name the slot, not [0].
  const path =
    issue.path.length === 3 &&
    isSlotPath(issue.path.slice(0, 2)) &&
    typeof valueAt(input, issue.path.slice(0, 2)) === 'string'
      ? issue.path.slice(0, 2)
      : issue.path;
  const field = fieldPath(path);
  const at = (msg: string) => (field ? `${field}: ${msg}` : msg);
  switch (issue.code) {
    case 'unrecognized_keys': {
      // Echo hostile names only in part: a 1 MB key must not make a 1 MB error message.
      const short = (k: string) => (k.length > 64 ? `${k.slice(0, 64)}…` : k);
      const keys = issue.keys.slice(0, 5).map((k) => (field ? `${field}.${short(k)}` : short(k)));
      return `${keys.join(', ')}: unknown field${keys.length > 1 ? 's' : ''}`;
    }
    case 'invalid_type': {
      const value = valueAt(input, issue.path);
      if (value === undefined) return at('is required');
      if (isSlotPath(issue.path)) return at('must be a URL string or a non-empty array of URL strings');
      const expected =
        issue.expected === 'int'
          ? 'an integer'
          : /^[aeiou]/.test(issue.expected)
            ? `an ${issue.expected}`
            : `a ${issue.expected}`;
      return at(`must be ${expected}`);
    }
    case 'invalid_value':
      if (valueAt(input, issue.path) === undefined) return at('is required');
      return at(
        issue.values.length === 1
          ? `must be ${JSON.stringify(issue.values[0])}`
          : `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`,
      );
    case 'too_small':
      if (issue.origin === 'array')
        return at(
          isSlotPath(issue.path)
            ? `must have at least ${issue.minimum} URL${Number(issue.minimum) > 1 ? 's' : ''}`
            : `must have at least ${issue.minimum} item${Number(issue.minimum) > 1 ? 's' : ''}`,
        );
      if (issue.origin === 'string')
        return at(Number(issue.minimum) <= 1 ? 'must not be empty' : `must be at least ${issue.minimum} characters`);
      return at(`must be at least ${issue.minimum}`);
    case 'too_big':
      if (issue.origin === 'array')
        return at(
          isSlotPath(issue.path)
            ? `takes at most ${issue.maximum} URL${Number(issue.maximum) > 1 ? 's' : ''}`
            : `must have at most ${issue.maximum} items`,
        );
      if (issue.origin === 'string') return at(`must be at most ${issue.maximum} characters`);
      return at(`must be at most ${issue.maximum}`);
    case 'invalid_format':
      // zod's own words ("Invalid ISO datetime") name neither the field's rule nor an example.
      if (issue.format === 'datetime') return at('must be an ISO 8601 date and time, e.g. 2026-01-01T00:00:00Z');
      return at(issue.message);
    default:
      return at(issue.message);
  }
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let v: unknown = root;
  for (const p of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<PropertyKey, unknown>)[p];
  }
  return v;
}

export function isSlotName(k: string): k is SlotName {
  return (SLOT_NAMES as readonly string[]).includes(k);
}
