import { SLOT_NAMES } from '../../contract/api.js';
import type { JobType } from '../../processors/types.js';
import { exampleBody, exampleJob, ok } from './examples.js';
import { API, pascal, ref, type Json } from './json.js';

/**
 * The submit route in the document: one operation per job type (its body schema and prose from the
 * catalogue, its responses from the route's template), and the batch items, one schema per type.
 */

/** The route's own path, replaced in the document by one path per job type. */
export const SUBMIT_TEMPLATE = `${API}/jobs/submit/{jobType}`;

/** A job type's models and media slots, then what every submit can say. */
function submitDescription(t: JobType): string {
  const models = t.models.map((m) => `- \`${m.name}\`: ${m.description}`).join('\n');
  const slots = SLOT_NAMES.filter((s) => t.slots[s])
    .map((s) => {
      const spec = t.slots[s]!;
      const count = spec.min === spec.max ? `${spec.max}` : `${spec.min}–${spec.max}`;
      return `- \`input.${s}\` (${spec.required ? 'required' : 'optional'}, ${count} ${spec.accepts} URL${spec.max > 1 ? 's' : ''}): ${spec.description}`;
    })
    .join('\n');
  return (
    `${t.description}\n\n**Models**\n\n${models}\n\n` +
    (slots ? `**Media slots** (each a public http(s) URL or an array of them)\n\n${slots}\n\n` : '') +
    'The job runs asynchronously: poll `GET /api/v1/jobs/{uuid}/status` (with `wait` to long-poll) or give a `webhook`.\n\n' +
    'Send an `Idempotency-Key` so a retry after a network error cannot create a second job: the same key with the same body returns the original response (with `Idempotent-Replayed: true`), with a different body 409.\n\n' +
    'Optional: `cancel_after` (a deadline: `"90s"`, `"5m"`, `"1h30m"` or seconds, 1 s to 7 d; past it the job is cancelled, queued or running), `retention` (purge the job\'s data this long after it finished, at most `RESULT_RETENTION`) and `priority` (−600..600 seconds, reorders only the caller\'s own queued jobs).'
  );
}

/** The request headers a submit reads. */
const submitParameters = () => [
  {
    name: 'Cancel-After',
    in: 'header',
    required: false,
    description:
      'The same as the body\'s `cancel_after` (Replicate\'s header): `"90s"`, `"5m"`, `"1h30m"` or seconds. Both given and different: 400.',
    schema: { type: 'string', examples: ['5m'] },
  },
  ref('parameters', 'Idempotency-Key'),
  ref('parameters', 'X-Request-Id'),
  {
    name: 'Prefer',
    in: 'header',
    required: false,
    description:
      '`wait=N` (RFC 7240, N ≤ 60 seconds): answer once the new job is terminal, or with its state after N seconds; `Preference-Applied` confirms. A replay of an idempotent request answers at once.',
    schema: { type: 'string', examples: ['wait=30'] },
  },
];

/** The route's responses, with the 200's replay headers and an example job of this type. */
function submitResponses(template: Json, t: JobType): Record<string, Json> {
  const responses = structuredClone(template.responses) as Record<string, Json>;
  const okRes = responses['200']!;
  okRes.headers = {
    ...(okRes.headers as Json),
    'Idempotent-Replayed': ref('headers', 'Idempotent-Replayed'),
    'Preference-Applied': {
      description: '`wait=N` when a `Prefer: wait=N` was honoured.',
      schema: { type: 'string' },
    },
  };
  (okRes.content as Record<string, Json>)['application/json']!.example = ok(
    exampleJob({ job_type: t.name, model: t.models[0]?.name }),
  );
  return responses;
}

/** The submit route, one operation per job type: body schema and prose from the catalogue, responses from the route. */
export function submitOperations(types: JobType[], template: Json): Record<string, Json> {
  const paths: Record<string, Json> = {};
  for (const t of types) {
    const responses = submitResponses(template, t);
    paths[`${API}/jobs/submit/${t.name}`] = {
      post: {
        ...template,
        operationId: `submit${pascal(t.name)}`,
        summary: `Submit a job of type ${t.name}`,
        description: submitDescription(t),
        parameters: submitParameters(),
        requestBody: {
          required: true,
          content: {
            'application/json': { schema: ref('schemas', `Submit${pascal(t.name)}`), example: exampleBody(t) },
          },
        },
        responses,
      },
    };
  }
  return paths;
}

/**
 * The items of POST /jobs/batch: each submit body (`SubmitX`) with an optional `idempotency_key`
 * of its own, as `BatchItemX`, and `BatchItem`, one of them chosen by `job_type`.
 */
export function batchItemSchemas(types: JobType[], schemas: Record<string, Json>): void {
  const key = {
    type: 'string',
    minLength: 1,
    maxLength: 255,
    description: "This item's Idempotency-Key (else `KEY:INDEX` of the batch's header, when it has one).",
  };
  const mapping: Record<string, string> = {};
  for (const t of types) {
    const body = schemas[`Submit${pascal(t.name)}`]!;
    const name = `BatchItem${pascal(t.name)}`;
    schemas[name] = {
      ...body,
      title: `${t.name} batch item`,
      properties: { ...(body.properties as Json), idempotency_key: key },
    };
    mapping[t.name] = ref('schemas', name).$ref;
  }
  schemas.BatchItem = {
    description: 'A submit body with its `job_type`, plus an optional `idempotency_key` of its own.',
    oneOf: Object.values(mapping).map(($ref) => ({ $ref })),
    discriminator: { propertyName: 'job_type', mapping },
  };
}
