import { z } from 'zod';
import {
  ERROR_TYPES,
  JOB_NOT_FOUND,
  JOB_STATUSES,
  MEDIA_KINDS,
  PRIORITY_MAX,
  PRIORITY_MIN,
  SLOT_NAMES,
  TERMINAL_STATUSES,
  WAITING_FOR_WORKER,
} from '../contract/api.js';
import { DELIVERY_STATES, ENDPOINT_STATUSES, EVENT_TYPES } from '../contract/webhook.js';
import { notFound } from '../errors.js';
import { MAX_URL_LENGTH } from '../media/policy.js';
import { withFastCheck } from './validation.js';

/**
 * Zod schemas of the response data shapes (docs/api.md). They are the source of the OpenAPI
 * document's component schemas, and test/openapi checks at compile time that they agree with the
 * types the server actually builds (ApiJob, ResultLink, WebhookPayload, ApiDelivery…).
 *
 * Objects are "loose": the contract says more fields may follow, so clients must ignore unknown ones.
 */

const isoTime = (what: string) => z.iso.datetime().describe(`${what} (ISO 8601, UTC).`);
const uuid = (what: string) => z.uuid().describe(what);

export const jobStatusSchema = z
  .enum(JOB_STATUSES)
  .describe(
    '`queued` and `processing` are intermediate; `completed`, `failed` and `cancelled` are terminal and never change again.',
  );

export const errorTypeSchema = z
  .enum(ERROR_TYPES)
  .describe(
    'Kind of failure: `media_fetch_failed` (unreachable, HTTP error, timeout, too large), `invalid_media` (not decodable, unsupported, no face found…), `processing_error`, `timeout` (ran past the job time limit), `internal_error`.',
  );

export const progressSchema = z
  .object({
    stage: z.string().describe('What the worker is doing, e.g. "swapping faces".'),
    percent: z.number().min(0).max(100).nullable().describe('0–100, or null when the stage has no measure.'),
    current: z.int().min(0).optional().describe('Units done (frames…), when counted.'),
    total: z.int().min(0).optional().describe('Units in all, when counted.'),
  })
  .describe('Structured progress reported by the worker; never sent in webhooks.');

export const apiJobSchema = z
  .looseObject({
    uuid: uuid('Identifier of the job (UUID v4).'),
    job_type: z.string().describe('The job type it was submitted as.'),
    model: z.string().describe('The model it runs with.'),
    status: jobStatusSchema,
    status_detail: z
      .string()
      .describe(`Human-readable detail of the state, e.g. "${WAITING_FOR_WORKER}", "downloading media".`),
    error_type: errorTypeSchema.nullable().describe('Set when the job failed, else null.'),
    error_message: z.string().nullable().describe('Failure message when the job failed, else null.'),
    result_ready: z.boolean().describe('True when GET /jobs/{uuid}/result will answer with a URL.'),
    created_at: isoTime('When the job was submitted'),
    started_at: isoTime('When a worker first started it').nullable(),
    finished_at: isoTime('When it reached a terminal state').nullable(),
    deadline: isoTime('When the job is cancelled if it has not finished (`cancel_after`)').nullable(),
    priority: z
      .int()
      .min(PRIORITY_MIN)
      .max(PRIORITY_MAX)
      .describe("Seconds: among the owner's own queued jobs, taken as if submitted this much earlier."),
    progress: progressSchema.nullable(),
    data_removed: z
      .boolean()
      .describe("True once the job's input, webhook and result were deleted (DELETE, or retention): a tombstone."),
    retention: z
      .string()
      .nullable()
      .describe(
        "The job's own `retention`, as given at submit (e.g. `1h`); null when the service's RESULT_RETENTION applies.",
      ),
    purge_at: isoTime(
      "When the job's data will be purged (set once the job is terminal; null before, and once purged)",
    ).nullable(),
  })
  .describe('A job. More fields may be added; ignore the ones you do not know.');

export const batchItemSchema = z
  .looseObject({
    code: z.int().describe('0 when the item was accepted, -1 otherwise.'),
    message: z.string().describe('`ok`, or what is wrong with this item, naming the field.'),
    status: z.int().describe('The HTTP status this item alone would have got (200, 400, 404, 409…).'),
    data: z.union([apiJobSchema, z.looseObject({})]).describe('The job, or `{}` when the item was refused.'),
    replayed: z
      .literal(true)
      .optional()
      .describe("Present when the item is the stored answer of an earlier submit with the item's idempotency key."),
  })
  .describe('The outcome of one item of a batch.');

export const batchResultSchema = z
  .looseObject({ items: z.array(batchItemSchema).describe('One per item, in the order given.') })
  .describe('The outcome of POST /jobs/batch.');

export const resultLinkSchema = z
  .looseObject({
    uuid: uuid('The job.'),
    url: z
      .url()
      .describe(
        'Absolute, signed download URL. Works without an API key until `expires_at`; tampered or expired URLs get 403.',
      ),
    expires_at: isoTime('When the URL stops working'),
    content_type: z.string().describe('Media type of the result, e.g. image/webp.'),
    size_bytes: z.int().min(0).describe('Size of the result in bytes.'),
  })
  .describe('A signed, expiring link to a job result.');

export const jobListSchema = z
  .looseObject({
    jobs: z.array(apiJobSchema).describe("The caller's jobs, newest first."),
    next_cursor: z.string().nullable().describe('Pass as `cursor` to get the next page; null on the last page.'),
  })
  .describe('One page of jobs.');

export const slotSpecSchema = z.looseObject({
  required: z.boolean(),
  min: z.int().min(0).describe('Fewest URLs the slot takes (a bare string counts as one).'),
  max: z.int().min(1).describe('Most URLs the slot takes.'),
  accepts: z.enum(MEDIA_KINDS).describe('Kind of media expected (sniffed from the bytes).'),
  description: z.string(),
});

const jsonSchemaObject = z.record(z.string(), z.unknown()).describe('A JSON Schema (draft 2020-12).');

export const jobTypeInfoSchema = z
  .looseObject({
    name: z.string().describe('The {jobType} path segment.'),
    description: z.string(),
    submit_path: z.string().describe('Where to POST a job of this type.'),
    slots: z.partialRecord(z.enum(SLOT_NAMES), slotSpecSchema).describe('Media slots under `input`.'),
    models: z.array(z.looseObject({ name: z.string(), description: z.string() })),
    options: jsonSchemaObject.describe('JSON Schema of the non-media fields of `input`.'),
    body_schema: jsonSchemaObject.describe('JSON Schema of the whole submit body.'),
  })
  .describe('One job type of the catalogue.');

export const jobTypesSchema = z.looseObject({ job_types: z.array(jobTypeInfoSchema) });

export const webhookPayloadSchema = z
  .looseObject({
    event_id: uuid('Identifier of the event; the same on every attempt. Deduplicate on it.'),
    event_type: z.enum(EVENT_TYPES),
    occurred_at: isoTime('When the job reached its terminal state'),
    job: z.looseObject({
      uuid: uuid('The job.'),
      status: z.enum(TERMINAL_STATUSES),
      status_detail: z.string(),
      error_message: z.string().nullable(),
      error_type: errorTypeSchema.nullable(),
      result_ready: z.boolean(),
    }),
  })
  .describe('The body of a webhook delivery, frozen when the event is created: every attempt sends the same bytes.');

export const deliveryAttemptSchema = z.looseObject({
  attempt: z.int().min(1).describe('1 for the first attempt.'),
  started_at: isoTime('When the attempt started'),
  http_status: z.int().nullable().describe("The receiver's HTTP status, null when none came (timeout, refused…)."),
  error: z.string().nullable().describe('Why the attempt failed, null when it succeeded.'),
  duration_ms: z.number().min(0),
  ok: z.boolean().describe('True for a 2xx answer.'),
  manual: z.boolean().describe('True for a redelivery asked for through the API.'),
});

export const deliverySchema = z
  .looseObject({
    event_id: z.uuid(),
    event_type: z.enum(EVENT_TYPES),
    url: z.string().describe('Where the event is delivered.'),
    state: z
      .enum(DELIVERY_STATES)
      .describe(
        '`pending` (more attempts to come), `delivered` (a 2xx came), `failed` (every attempt failed, or a 410 Gone from an owner endpoint), `skipped` (an owner endpoint was disabled).',
      ),
    attempts: z.array(deliveryAttemptSchema),
    next_attempt_at: isoTime('When the next scheduled attempt runs, while pending').nullable(),
    created_at: isoTime('When the event was created'),
  })
  .describe('One webhook event of a job and its delivery attempts.');

export const deliveryListSchema = z.looseObject({ deliveries: z.array(deliverySchema) });

const eventsField = z
  .array(z.enum(EVENT_TYPES))
  .min(1)
  .refine((a) => new Set(a).size === a.length, { message: 'must not repeat an event' });

/** The body of POST /webhook-endpoints. */
export const newEndpointSchema = z.strictObject({
  url: z
    .string()
    .max(MAX_URL_LENGTH)
    .describe('Receives a POST for each subscribed event of every job of yours. A public http or https URL.'),
  events: eventsField.optional().describe('Events to deliver; all three when omitted.'),
  description: z.string().max(256).optional().describe('Your note (at most 256 characters).'),
});

/** The body of PATCH /webhook-endpoints/{id}: any of the fields of a new endpoint. */
export const endpointChangesSchema = z
  .strictObject({
    url: newEndpointSchema.shape.url.optional(),
    events: eventsField.optional().describe('Events to deliver.'),
    description: z.string().max(256).optional(),
  })
  .refine((b) => Object.keys(b).length > 0, { message: 'give at least one of url, events, description' });

/** The body of POST /webhook-endpoints/{id}/recover. */
export const recoverSchema = z.strictObject({
  since: z.iso
    .datetime({ offset: true })
    .describe('Queue again the failed and skipped deliveries of events since this time (ISO 8601).'),
});

export const endpointSchema = z
  .looseObject({
    id: z.string().describe('Identifier of the endpoint (`ep_…`).'),
    url: z.string(),
    events: z.array(z.enum(EVENT_TYPES)),
    description: z.string(),
    status: z
      .enum(ENDPOINT_STATUSES)
      .describe('A `disabled` endpoint gets no attempts; its events are recorded as `skipped`.'),
    disabled_reason: z
      .string()
      .nullable()
      .describe('Why it was disabled (a 410 Gone, or failing for WEBHOOK_DISABLE_AFTER), else null.'),
    disabled_at: isoTime('When it was disabled').nullable(),
    secret: z
      .string()
      .describe(
        '`whsec_…`: signs X-Service-Signature (the whole string as the key) and webhook-signature (Standard Webhooks).',
      ),
    created_at: isoTime('When it was created'),
    updated_at: isoTime('When it last changed'),
  })
  .describe("An owner's webhook endpoint: receives every subscribed event of every job of the owner.");

export const endpointListSchema = z.looseObject({ endpoints: z.array(endpointSchema).describe('Newest first.') });
export const endpointDeliverySchema = deliverySchema
  .extend({ job_uuid: z.uuid().describe('The job the event announces.') })
  .describe('One delivery of an owner endpoint.');
export const endpointDeliveryListSchema = z.looseObject({
  deliveries: z.array(endpointDeliverySchema).describe('Newest first.'),
  next_cursor: z.string().nullable().describe('Pass as `cursor` for older deliveries; null on the last page.'),
});

/** The success envelope around `data`. */
export function okEnvelope<T extends z.ZodType>(data: T) {
  return z.looseObject({
    code: z.literal(0).describe('0 on success.'),
    message: z.literal('ok'),
    data,
  });
}

export const errorEnvelopeSchema = z
  .looseObject({
    code: z.literal(-1).describe('-1 on error.'),
    message: z
      .string()
      .describe(
        'What is wrong, in one sentence naming the field (e.g. `input.source[1]: must be a public http or https URL`).',
      ),
    data: z.looseObject({}).describe('Always an empty object on error.'),
  })
  .describe('Every error response under /api/v1.');

export const healthSchema = z
  .looseObject({
    status: z.string().describe('`ok` (liveness) or `ready` (readiness).'),
    database: z.enum(['sqlite', 'postgres']).optional().describe('The store in use (readiness).'),
  })
  .describe('Liveness or readiness.');

export type ApiJobShape = z.infer<typeof apiJobSchema>;
export type ResultLinkShape = z.infer<typeof resultLinkSchema>;
export type JobListShape = z.infer<typeof jobListSchema>;
export type JobTypeInfoShape = z.infer<typeof jobTypeInfoSchema>;
export type WebhookPayloadShape = z.infer<typeof webhookPayloadSchema>;
export type DeliveryShape = z.infer<typeof deliverySchema>;
export type EndpointShape = z.infer<typeof endpointSchema>;
export type EndpointDeliveryShape = z.infer<typeof endpointDeliverySchema>;

/**
 * The named shapes of the OpenAPI document (components/schemas): an `id` in zod's global registry
 * (next to their descriptions), so fastify-type-provider-zod's transforms render them as $refs.
 */
export const componentRegistry = z.globalRegistry;
export const jobEnvelopeSchema = okEnvelope(apiJobSchema);
export const resultLinkEnvelopeSchema = okEnvelope(resultLinkSchema);
export const jobListEnvelopeSchema = okEnvelope(jobListSchema);
export const jobTypesEnvelopeSchema = okEnvelope(jobTypesSchema);
export const deliveryEnvelopeSchema = okEnvelope(deliverySchema);
export const deliveryListEnvelopeSchema = okEnvelope(deliveryListSchema);
export const healthEnvelopeSchema = okEnvelope(healthSchema);
export const batchEnvelopeSchema = okEnvelope(batchResultSchema);
export const endpointEnvelopeSchema = okEnvelope(endpointSchema);
export const endpointListEnvelopeSchema = okEnvelope(endpointListSchema);
export const endpointDeliveryListEnvelopeSchema = okEnvelope(endpointDeliveryListSchema);
for (const [id, s] of [
  ['JobStatus', jobStatusSchema],
  ['ErrorType', errorTypeSchema],
  ['Job', apiJobSchema],
  ['JobEnvelope', jobEnvelopeSchema],
  ['ResultLink', resultLinkSchema],
  ['ResultLinkEnvelope', resultLinkEnvelopeSchema],
  ['JobList', jobListSchema],
  ['JobListEnvelope', jobListEnvelopeSchema],
  ['SlotSpec', slotSpecSchema],
  ['JobTypeInfo', jobTypeInfoSchema],
  ['JobTypes', jobTypesSchema],
  ['JobTypesEnvelope', jobTypesEnvelopeSchema],
  ['WebhookPayload', webhookPayloadSchema],
  ['WebhookDeliveryAttempt', deliveryAttemptSchema],
  ['WebhookDelivery', deliverySchema],
  ['WebhookDeliveryEnvelope', deliveryEnvelopeSchema],
  ['WebhookDeliveries', deliveryListSchema],
  ['WebhookDeliveriesEnvelope', deliveryListEnvelopeSchema],
  ['ErrorEnvelope', errorEnvelopeSchema],
  ['Health', healthSchema],
  ['JobProgress', progressSchema],
  ['BatchItemResult', batchItemSchema],
  ['BatchResult', batchResultSchema],
  ['BatchResultEnvelope', batchEnvelopeSchema],
  ['HealthEnvelope', healthEnvelopeSchema],
  ['WebhookEndpoint', endpointSchema],
  ['WebhookEndpointEnvelope', endpointEnvelopeSchema],
  ['WebhookEndpoints', endpointListSchema],
  ['WebhookEndpointsEnvelope', endpointListEnvelopeSchema],
  ['WebhookEndpointDelivery', endpointDeliverySchema],
  ['WebhookEndpointDeliveries', endpointDeliveryListSchema],
  ['WebhookEndpointDeliveriesEnvelope', endpointDeliveryListEnvelopeSchema],
] as Array<[string, z.ZodType]>) {
  componentRegistry.add(s, { ...componentRegistry.get(s), id });
}
export const COMPONENT_IDS: readonly string[] = [...componentRegistry._idmap.keys()];

/** Names of the documented error responses (components/responses), by HTTP status. */
export const ERROR_RESPONSES = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  409: 'Conflict',
  410: 'Gone',
  413: 'PayloadTooLarge',
  415: 'UnsupportedMediaType',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
} as const;
export type ErrorStatus = keyof typeof ERROR_RESPONSES;

/** A route's `schema.response`: the success shape plus the errors it can answer (rendered as $refs). */
export function responses(
  success: Record<number, { description: string; schema: z.ZodType; type?: string }>,
  ...errors: ErrorStatus[]
) {
  const out: Record<number, unknown> = {};
  for (const [status, s] of Object.entries(success)) {
    out[Number(status)] = {
      description: s.description,
      content: { [s.type ?? 'application/json']: { schema: s.schema } },
    };
  }
  for (const status of errors)
    out[status] = {
      description: ERROR_RESPONSES[status],
      content: { 'application/json': { schema: errorEnvelopeSchema } },
    };
  return out;
}

/** Errors any authenticated route can answer. */
export const COMMON_ERRORS: ErrorStatus[] = [401, 429, 500];

/** A path parameter holding a job or event uuid: documented as one, checked by the handler (malformed → 404). */
export const uuidParam = (description: string) => z.string().meta({ format: 'uuid', description });

/** The `{uuid}` of every job route. */
export const jobParams = withFastCheck(z.object({ uuid: uuidParam("The job's uuid.") }), (params) =>
  typeof (params as { uuid?: unknown } | null)?.uuid === 'string' ? (params as { uuid: string }) : undefined,
);

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A path's job uuid, normalised; a malformed one is a job that does not exist (the same 404, word for word). */
export function jobUuid(raw: string): string {
  if (!UUID_RE.test(raw)) throw notFound(JOB_NOT_FOUND);
  return raw.toLowerCase();
}

/** A path's event uuid, normalised; a malformed one is an event that does not exist ('' matches none). */
export const eventUuid = (raw: string): string => (UUID_RE.test(raw) ? raw.toLowerCase() : '');
