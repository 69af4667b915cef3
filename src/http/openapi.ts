import fs from 'node:fs';
import type { SwaggerOptions } from '@fastify/swagger';
import { createJsonSchemaTransform, createJsonSchemaTransformObject } from 'fastify-type-provider-zod';
import { submitSchema, toJsonSchema, webhookSchema } from '../jobs/submit-schema.js';
import type { Catalogue } from '../processors/catalogue.js';
import { type JobType } from '../processors/types.js';
import { SLOT_NAMES, WAITING_FOR_WORKER } from '../contract/api.js';
import { EVENT_TYPES } from '../contract/webhook.js';
import { formatDuration } from '../media/net-errors.js';
import { COMPONENT_IDS, componentRegistry, ERROR_RESPONSES } from './schemas.js';

/**
 * The OpenAPI 3.1 document. Paths, parameters and response shapes come from the routes' own zod
 * schemas (@fastify/swagger + fastify-type-provider-zod: the same schemas that validate requests),
 * component schemas from the registry in schemas.ts, and the per-job-type submit bodies from the
 * catalogue (submit-schema.ts). What is left here is what no schema can say: prose, examples,
 * response headers, the webhooks, and the expansion of the submit route into one operation per job
 * type. test/openapi checks the result against the OpenAPI 3.1 meta-schema, against every route the
 * server registers, and against real responses.
 */

export interface OpenApiDeps {
  catalogue: Catalogue;
  allowPrivate: boolean;
  /** The configured delivery schedule and timeout (WEBHOOK_RETRY_SCHEDULE, WEBHOOK_TIMEOUT). */
  webhookRetryScheduleMs: readonly number[];
  webhookTimeoutMs: number;
  /** Open event streams per owner (GET /jobs/{uuid}/events answers 429 past it). */
  maxStreamsPerOwner: number;
}

type Json = Record<string, unknown>;

const API = '/api/v1';
const ref = (kind: 'schemas' | 'responses' | 'parameters' | 'headers', name: string) => ({
  $ref: `#/components/${kind}/${name}`,
});

function packageVersion(): string {
  try {
    // Same depth from src/http (tsx) and dist/http (built).
    const pkg = JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version?: string;
    };
    return pkg.version ?? '0.0.0';
  } catch {
    return '0.0.0';
  }
}

/** JSON Schema keywords that clutter the document without helping a reader or a generator. */
function tidy(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(tidy);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Json = {};
  const s = schema as Json;
  for (const [k, v] of Object.entries(s)) {
    if (k === '$schema' || k === '$id') continue;
    // zod spells out long regexes next to the format; the format says it.
    if (k === 'pattern' && typeof s.format === 'string' && ['date-time', 'uuid', 'email', 'uri'].includes(s.format))
      continue;
    out[k] = tidy(v);
  }
  // z.literal(0) renders as a number; the envelope's code is an integer.
  if (out.type === 'number' && Number.isInteger(out.const)) out.type = 'integer';
  return out;
}

const pascal = (name: string) =>
  name
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join('');

/** A body that passes validation: first model, example URLs in the required slots, option defaults. */
function exampleBody(t: JobType): Json {
  const input: Json = {};
  for (const s of SLOT_NAMES) {
    const spec = t.slots[s];
    if (!spec?.required) continue;
    const ext = spec.accepts === 'image' ? 'jpg' : spec.accepts === 'audio' ? 'mp3' : 'mp4';
    const url = `https://media.example.com/${s}.${ext}`;
    input[s] =
      spec.max > 1 && spec.min > 1
        ? Array.from({ length: spec.min }, (_, i) => url.replace(`.${ext}`, `-${i + 1}.${ext}`))
        : url;
  }
  return {
    job_type: t.name,
    model: t.models[0]?.name,
    input,
    webhook: { url: 'https://hooks.example.com/media-jobs', secret: 'a long random string', events: [...EVENT_TYPES] },
  };
}

const exampleJob = (over: Json = {}) => ({
  uuid: '0b7e5a52-1c1f-4a8e-9f61-1f0a3c5d7e90',
  job_type: 'image-transform',
  model: 'lanczos3',
  status: 'queued',
  status_detail: WAITING_FOR_WORKER,
  error_type: null,
  error_message: null,
  result_ready: false,
  created_at: '2026-01-01T00:00:00.000Z',
  started_at: null,
  finished_at: null,
  deadline: null,
  priority: 0,
  progress: null,
  data_removed: false,
  retention: null,
  purge_at: null,
  ...over,
});

const ok = (data: unknown) => ({ code: 0, message: 'ok', data });

interface ErrorSpec {
  status: number;
  name: string;
  description: string;
  example: string;
}

/** Rate-limit headers: on every answer to a request with a valid API key, when limits are on. */
const RATE_LIMIT_HEADERS = Object.fromEntries(
  ['RateLimit', 'RateLimit-Policy', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'].map((h) => [
    h,
    ref('headers', h),
  ]),
);

const ERRORS: ErrorSpec[] = [
  {
    status: 400,
    name: 'BadRequest',
    description: 'The request is invalid: the message names the field.',
    example: 'input.source: must be a public http or https URL (host resolves to a private address)',
  },
  {
    status: 401,
    name: 'Unauthorized',
    description: 'Missing, malformed, unknown or revoked API key.',
    example: 'invalid or revoked API key',
  },
  {
    status: 403,
    name: 'Forbidden',
    description: 'The signed result URL is invalid or has expired.',
    example: 'result URL has expired; fetch a new one from GET /api/v1/jobs/{uuid}/result',
  },
  {
    status: 404,
    name: 'NotFound',
    description: "The job (or job type, or event) does not exist or is not the caller's: both answer the same.",
    example: 'job not found',
  },
  {
    status: 409,
    name: 'Conflict',
    description:
      'Idempotency-Key reused with a different body; cancel of a terminal job; result not ready or never will be.',
    example: 'job is already completed; only queued or processing jobs can be cancelled',
  },
  {
    status: 410,
    name: 'Gone',
    description: 'The result was deleted at the end of its retention period.',
    example: 'result was deleted at the end of its retention period',
  },
  {
    status: 413,
    name: 'PayloadTooLarge',
    description: 'The body is larger than the limit (MAX_BODY_BYTES).',
    example: 'body is larger than 1048576 bytes',
  },
  {
    status: 414,
    name: 'UriTooLong',
    description: 'A path segment (such as a job uuid) is longer than the router takes (100 characters).',
    example: 'a path segment is too long',
  },
  {
    status: 415,
    name: 'UnsupportedMediaType',
    description: 'A write route got a body that is not JSON.',
    example: 'Content-Type must be application/json',
  },
  {
    status: 429,
    name: 'TooManyRequests',
    description: 'Rate limited: retry after the number of seconds in `Retry-After`.',
    example: 'rate limit exceeded: 60 submit requests per minute for this API key; retry in 42s',
  },
  {
    status: 500,
    name: 'InternalError',
    description: 'Anything unexpected. No stack trace is returned; quote X-Request-Id when reporting it.',
    example: 'internal error',
  },
  {
    status: 503,
    name: 'ServiceUnavailable',
    description:
      'Not ready: the database is not reachable or its migrations are not applied, or the process is shutting down.',
    example: 'database is not reachable',
  },
];

function errorResponses(): Record<string, Json> {
  const out: Record<string, Json> = {};
  for (const e of ERRORS) {
    const headers: Json = { 'X-Request-Id': ref('headers', 'X-Request-Id') };
    if (e.status === 401)
      headers['WWW-Authenticate'] = { description: 'Bearer challenge.', schema: { type: 'string' } };
    if (e.status === 429) headers['Retry-After'] = ref('headers', 'Retry-After');
    // Sent on every answer to a request with a valid API key (so not on 401, nor on result downloads).
    if (e.status !== 401 && e.status !== 403) Object.assign(headers, RATE_LIMIT_HEADERS);
    out[e.name] = {
      description: `${e.status}: ${e.description}`,
      headers,
      content: {
        'application/json': {
          schema: ref('schemas', 'ErrorEnvelope'),
          example: { code: -1, message: e.example, data: {} },
        },
      },
    };
  }
  return out;
}

/** Headers on every success of an authenticated route. */
const SUCCESS_HEADERS = { 'X-Request-Id': ref('headers', 'X-Request-Id'), ...RATE_LIMIT_HEADERS };

const exampleLink = {
  uuid: exampleJob().uuid,
  url: 'https://media-jobs.example.com/results/0b7e5a52-1c1f-4a8e-9f61-1f0a3c5d7e90.webp?expires=1767229200&signature=5d41402abc4b2a76b9719d911017c592ae2f8f1b7cbb0d6e4e1f3a3c3b1e9f20',
  expires_at: '2026-01-01T01:00:00.000Z',
  content_type: 'image/webp',
  size_bytes: 48213,
};

interface Prose {
  summary: string;
  description?: string;
  /** Example of the 200 body. */
  example?: unknown;
  /** Extra headers of the 200 response. */
  headers?: Json;
  /** Parameters no route schema declares (headers the handler reads). */
  parameters?: Json[];
}

/** What the route schemas cannot say, by operationId. */
const PROSE: Record<string, Prose> = {
  listJobs: {
    summary: "List the caller's jobs",
    description:
      'Newest first, one page at a time. Pass `next_cursor` back as `cursor` for the next page; it is null on the last page.',
    example: ok({ jobs: [exampleJob()], next_cursor: null }),
  },
  getJobStatus: {
    summary: 'Read the state of a job',
    description:
      'With `wait` (seconds) the request is held while the job is not terminal and answered the moment it reaches a terminal state, ' +
      'or with its current state when the time is up: a long poll, so a client learns the end at once without polling every second. ' +
      "Without `wait` (or `wait=0`) it answers at once. A queued job's `status_detail` tells its place in the queue.",
    example: ok(
      exampleJob({
        job_type: 'video-face-swap',
        model: 'warp-blend-v1',
        status: 'processing',
        status_detail: 'swapping faces (41 of 120)',
        started_at: '2026-01-01T00:00:01.000Z',
        progress: { stage: 'swapping faces', percent: 34.2, current: 41, total: 120 },
      }),
    ),
  },
  cancelJob: {
    summary: 'Cancel a job',
    description:
      'A `queued` or `processing` job becomes `cancelled` at once (a running processor is aborted and its late result discarded), and `job.cancelled` is sent if subscribed. ' +
      'No body is needed (an empty body or `{}` is fine; any field is a 400). A job already in a terminal state answers 409.',
    example: ok(
      exampleJob({
        status: 'cancelled',
        status_detail: 'cancelled by the client',
        finished_at: '2026-01-01T00:00:02.000Z',
        purge_at: '2026-01-08T00:00:02.000Z',
      }),
    ),
    parameters: [ref('parameters', 'X-Request-Id')],
  },
  getJobResult: {
    summary: 'Get a signed URL of the result',
    description:
      'Only when `result_ready` is true. The URL is absolute, needs no API key, and expires at `expires_at` (ask again for a fresh one). ' +
      'A job that is not finished, failed or was cancelled answers 409; a result deleted after its retention answers 410.',
    example: ok(exampleLink),
  },
  deleteJob: {
    summary: "Delete a finished job's data",
    description:
      'For a `completed`, `failed` or `cancelled` job of the caller: the result blob and any stored copies are deleted (old signed URLs stop working), the submitted `input`, the webhook URL and secret and the delivery bodies are erased. ' +
      'The job stays as a tombstone: `status` unchanged, `result_ready: false`, `data_removed: true`; `GET …/result` then answers 410. A repeated DELETE answers the same 200. ' +
      "A `queued` or `processing` job answers 409 (cancel it first); another owner's or an unknown job 404. " +
      "If the result store fails half-way the job's data is already erased and its result refused; the purge finishes by itself and this answers 503 (retry to confirm). " +
      "The same purge runs by itself when the job's `retention` (or `RESULT_RETENTION`) ends.",
    example: ok(
      exampleJob({
        status: 'completed',
        status_detail: 'done',
        finished_at: '2026-01-01T00:00:02.000Z',
        data_removed: true,
      }),
    ),
    parameters: [ref('parameters', 'X-Request-Id')],
  },
  submitBatch: {
    summary: 'Submit many jobs in one request',
    description:
      '`{"jobs": [item, …]}`: 1 to `MAX_BATCH_ITEMS` (default 1,000) items; an item is a submit body with its `job_type`, plus an optional `idempotency_key` of its own. ' +
      'Items are independent: the answer is 200 with `data.items[i]` = `{code, message, status, data}` in order, where `status` is the HTTP status the item alone would have got (200, 400, 404, 409…) and `data` its job or `{}`. One invalid item never blocks the others, and nothing is created for it.\n\n' +
      'With an `Idempotency-Key` header, an item without its own key uses `KEY:INDEX` (its 0-based index): the same as a single submit with that key, so a retried batch replays every item and an item whose body changed answers its own 409.\n\n' +
      'Rate limits count every item as one submit; a batch over what is left of the minute is refused whole (429).',
    example: ok({
      items: [
        { code: 0, message: 'ok', status: 200, data: exampleJob() },
        { code: -1, message: 'model: must be one of "lanczos3", "mitchell", "nearest"', status: 400, data: {} },
      ],
    }),
    parameters: [ref('parameters', 'Idempotency-Key'), ref('parameters', 'X-Request-Id')],
  },
  getJob: {
    summary: 'Read a job with its input',
    description:
      'The job object plus the `input` it was submitted with and its webhook URL and events (never the secret). For pages that show one job; to follow a job use the status route or its events.',
  },
  watchJob: {
    summary: "Follow a job's state as Server-Sent Events",
    description:
      'A `text/event-stream` (send the API key as the Bearer header, e.g. with `fetch`, since `EventSource` cannot). ' +
      'Each message has an `id`, an `event` and one line of JSON `data`, the job object:\n\n' +
      '- `status`: the state changed (the first message is always the current state);\n' +
      "- `progress`: only `status_detail` or `progress` changed (a processor's progress, the place in the queue), at most one every 500 ms (the latest state at the end of the interval);\n" +
      '- `error`: the job could not be read (the envelope); reconnect to resume.\n\n' +
      'The stream ends right after the `status` message of a terminal state (`completed`, `failed`, `cancelled`); a job that is already terminal gets that one message. ' +
      "An event's `id` names the state it carries, the same on every connection: a client that reconnects with `Last-Event-ID` (as EventSource does by itself) gets only what changed since, and one whose last event was the terminal state gets 204, so EventSource stops reconnecting. " +
      'Comment lines (`: keep-alive`) keep idle connections open. Terminal states are sent the moment they happen; other changes within about a second. ' +
      'A job of another owner answers 404 with the envelope.',
  },
  listWebhookDeliveries: {
    summary: "A job's webhook events and their delivery attempts",
    description:
      'Every webhook event of the job (terminal events only): where it goes, its state (`pending`, `delivered`, `failed`), each attempt so far and when the next one runs.',
  },
  redeliverWebhook: {
    summary: 'Send a webhook event again now',
    description:
      'Same event id and same body bytes, a fresh timestamp and signature. Recorded as a manual attempt; a success marks a pending or failed delivery delivered. Answers with the delivery afterwards.',
    parameters: [ref('parameters', 'X-Request-Id')],
  },
  listJobTypes: {
    summary: 'The job types, their media slots, models and options',
    description:
      'Everything here comes from the same catalogue declarations that validate submits; `body_schema` is the JSON Schema of the submit body.',
  },
  getOpenApi: {
    summary: 'This document',
    description: 'The OpenAPI 3.1 description of the service. No API key needed; not wrapped in the envelope.',
  },
  getDocs: {
    summary: 'Interactive API documentation',
    description: 'Swagger UI, served entirely by this service (no CDN), reading /api/v1/openapi.json.',
  },
  downloadResult: {
    summary: 'Download a result (signed URL)',
    description:
      'The `url` of `GET /api/v1/jobs/{uuid}/result` points here when results are stored locally. The signature is the credential: no API key. ' +
      'A tampered or expired URL answers 403; a result deleted after its retention 410. Errors use the envelope.',
    headers: {
      'Content-Length': { schema: { type: 'integer' } },
      'Cache-Control': { schema: { type: 'string' }, description: 'private, until the URL expires.' },
    },
  },
  healthz: {
    summary: 'Liveness',
    description: 'Answers 200 while the process is up and serving HTTP. For orchestrators; no API key.',
    example: ok({ status: 'ok' }),
  },
  readyz: {
    summary: 'Readiness',
    description:
      "Answers 200 when the service can take traffic (the database answers, every migration is applied, and this process's result uploads are not failing for a storage outage or a full results disk), 503 with the reason when it cannot or is shutting down. No API key.",
    example: ok({ status: 'ready', database: 'sqlite' }),
  },
  metrics: {
    summary: 'Prometheus metrics',
    description:
      "Metrics in the Prometheus text exposition format. Jobs submitted and finished (`media_jobs_jobs_*_total`) and queue depth are the whole cluster's, read from database counters, the same on every process; `media_jobs_process_*`, HTTP latency, processing time and webhook deliveries are this process's. Every process serves it on its port, worker-only ones included. No API key: keep it off the public edge.",
  },
};

const SUBMIT_TEMPLATE = `${API}/jobs/submit/{jobType}`;

/** The submit route, one operation per job type: body schema and prose from the catalogue, responses from the route. */
function submitOperations(types: JobType[], template: Json): Record<string, Json> {
  const paths: Record<string, Json> = {};
  for (const t of types) {
    const models = t.models.map((m) => `- \`${m.name}\`: ${m.description}`).join('\n');
    const slots = SLOT_NAMES.filter((s) => t.slots[s])
      .map((s) => {
        const spec = t.slots[s]!;
        const count = spec.min === spec.max ? `${spec.max}` : `${spec.min}–${spec.max}`;
        return `- \`input.${s}\` (${spec.required ? 'required' : 'optional'}, ${count} ${spec.accepts} URL${spec.max > 1 ? 's' : ''}): ${spec.description}`;
      })
      .join('\n');
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
    paths[`${API}/jobs/submit/${t.name}`] = {
      post: {
        ...template,
        operationId: `submit${pascal(t.name)}`,
        summary: `Submit a job of type ${t.name}`,
        description:
          `${t.description}\n\n**Models**\n\n${models}\n\n` +
          (slots ? `**Media slots** (each a public http(s) URL or an array of them)\n\n${slots}\n\n` : '') +
          'The job runs asynchronously: poll `GET /api/v1/jobs/{uuid}/status` (with `wait` to long-poll) or give a `webhook`.\n\n' +
          'Send an `Idempotency-Key` so a retry after a network error cannot create a second job: the same key with the same body returns the original response (with `Idempotent-Replayed: true`), with a different body 409.\n\n' +
          'Optional: `cancel_after` (a deadline: `"90s"`, `"5m"`, `"1h30m"` or seconds, 1 s to 7 d; past it the job is cancelled, queued or running), `retention` (purge the job\'s data this long after it finished, at most `RESULT_RETENTION`) and `priority` (−600..600 seconds, reorders only the caller\'s own queued jobs).',
        parameters: [
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
        ],
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

const ERROR_NAMES = new Set<string>(Object.values(ERROR_RESPONSES));

/** Adds what the route schemas cannot carry to one generated operation. */
function finishOperation(op: Json, authenticated: boolean): void {
  const prose = PROSE[op.operationId as string];
  if (prose) {
    op.summary = prose.summary;
    if (prose.description) op.description = prose.description;
    if (prose.parameters) op.parameters = [...((op.parameters as Json[] | undefined) ?? []), ...prose.parameters];
  }
  const responses = (op.responses ?? {}) as Record<string, Json>;
  for (const [status, res] of Object.entries(responses)) {
    // Error responses point at the shared components (headers, example) named in route schemas.
    if (typeof res.description === 'string' && ERROR_NAMES.has(res.description)) {
      responses[status] = ref('responses', res.description);
      continue;
    }
    if (status !== '200') continue;
    res.headers = { ...(authenticated ? SUCCESS_HEADERS : {}), ...(prose?.headers ?? {}) };
    if (Object.keys(res.headers as Json).length === 0) delete res.headers;
    const json = (res.content as Record<string, Json> | undefined)?.['application/json'];
    if (json && prose?.example !== undefined) json.example = prose.example;
  }
  // The router refuses a path parameter over its length limit before any route runs.
  if (((op.parameters as Json[] | undefined) ?? []).some((p) => p.in === 'path'))
    responses['414'] = ref('responses', 'UriTooLong');
  // Any route answers 400 to an HTTP/1.1 request without a Host header.
  if (!Object.keys(responses).some((k) => k.startsWith('4'))) responses['400'] = ref('responses', 'BadRequest');
  if (op.operationId === 'watchJob') {
    responses['204'] = {
      description:
        'The client reconnected with the `Last-Event-ID` of the terminal state: there is nothing more (a standard EventSource stops).',
      headers: SUCCESS_HEADERS,
    };
  }
  if (op.operationId === 'downloadResult') {
    // The result's own type (the `content_type` of its result link).
    responses['200']!.content = Object.fromEntries(
      ['image/*', 'video/*', 'audio/*', 'application/json', 'application/octet-stream'].map((t) => [t, {}]),
    );
  }
}

/** Parameters rendered from zod: path ones first, without the noise (`$schema`, long regexes next to a format). */
function finishParameters(op: Json): void {
  const params = (op.parameters as Json[] | undefined) ?? [];
  for (const p of params) if (p.schema) p.schema = tidy(p.schema);
  params.sort((a, b) => Number(b.in === 'path') - Number(a.in === 'path'));
}

/** "at once, then 1m, 5m, 30m and 6h after each failure", from the configured schedule. */
function scheduleText(scheduleMs: readonly number[]): string {
  const [first = 0, ...retries] = scheduleMs;
  const start = first === 0 ? 'at once' : `${formatDuration(first)} after the job ends`;
  if (retries.length === 0) return `${start}, once`;
  const list = retries.map(formatDuration);
  const last = list.pop()!;
  return `${start}, then ${list.length > 0 ? `${list.join(', ')} and ${last}` : last} after each failure`;
}

function webhookOperations(deps: OpenApiDeps): Json {
  const out: Json = {};
  const examples: Record<string, Json> = {
    'job.completed': {
      status: 'completed',
      status_detail: 'done',
      error_message: null,
      error_type: null,
      result_ready: true,
    },
    'job.failed': {
      status: 'failed',
      status_detail: 'failed',
      error_message: 'input.source: download failed: HTTP 404',
      error_type: 'media_fetch_failed',
      result_ready: false,
    },
    'job.cancelled': {
      status: 'cancelled',
      status_detail: 'cancelled by the client',
      error_message: null,
      error_type: null,
      result_ready: false,
    },
  };
  for (const event of EVENT_TYPES) {
    out[event] = {
      post: {
        operationId: `webhook${pascal(event)}`,
        tags: ['Webhooks'],
        summary: `${event}: sent to webhook.url`,
        description:
          'Sent only when a job reaches a terminal state, only for the events in `webhook.events` (all three when omitted). ' +
          `Attempts: ${scheduleText(deps.webhookRetryScheduleMs)}; any 2xx ends it. No redirects are followed; ${formatDuration(deps.webhookTimeoutMs)} timeout. ` +
          'Verify `X-Service-Signature` = lowercase hex HMAC-SHA256(secret, `X-Service-Timestamp` + "." + raw body) on the raw body before parsing it ' +
          "(`import { verifyWebhook } from 'media-jobs'`), acknowledge quickly, and deduplicate on `event_id`.",
        parameters: [
          {
            name: 'X-Service-Event-Id',
            in: 'header',
            required: true,
            description: 'The event id (same as `event_id`; the same on every attempt).',
            schema: { type: 'string', format: 'uuid' },
          },
          {
            name: 'X-Service-Timestamp',
            in: 'header',
            required: true,
            description: 'Unix seconds, fresh for each attempt; part of the signed message.',
            schema: { type: 'string', pattern: '^[0-9]+$' },
          },
          {
            name: 'X-Service-Signature',
            in: 'header',
            required: false,
            description:
              'Only when the webhook has a secret: lowercase hex HMAC-SHA256(secret, timestamp + "." + rawBody).',
            schema: { type: 'string', pattern: '^[0-9a-f]{64}$' },
          },
        ],
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: ref('schemas', 'WebhookPayload'),
              example: {
                event_id: '5b0a6f0e-2a39-4f5e-9a52-8f1b8d1e2c3a',
                event_type: event,
                occurred_at: '2026-01-01T00:00:00.000Z',
                job: { uuid: exampleJob().uuid, ...examples[event] },
              },
            },
          },
        },
        security: [],
        responses: {
          '2XX': { description: 'Any 2xx acknowledges the delivery.' },
          default: { description: 'Anything else (or a timeout) is retried on the schedule.' },
        },
      },
    };
  }
  return out;
}

const OVERVIEW = `Asynchronous media jobs: submit a job, follow its status (long-poll or webhook), cancel it, fetch a signed result URL.

**Authentication.** Every \`/api/v1\` route except this document needs \`Authorization: Bearer <API key>\`. Keys are created with \`media-jobs keys create --owner NAME\`. Missing, malformed, unknown and revoked keys all answer 401.

**Envelope.** Every response under \`/api/v1\` is \`{"code":0,"message":"ok","data":{…}}\` on success and \`{"code":-1,"message":"<reason>","data":{}}\` on error; the HTTP status says which error.

**Request ids.** Every response carries \`X-Request-Id\`; a valid incoming one is echoed.

**Idempotency.** Send \`Idempotency-Key\` on submit: the same key with the same body (key order does not matter) returns the original response for 24 hours, a different body 409.

**States.** \`queued\` → \`processing\` → \`completed\` | \`failed\` | \`cancelled\`. Terminal states never change.

**Clients.** \`import { MediaJobsClient, verifyWebhook } from 'media-jobs'\`, or the \`media-jobs submit|status|wait|result|cancel|jobs\` commands.`;

/**
 * @fastify/swagger's options: the document's fixed parts, fastify-type-provider-zod's transforms
 * for the routes' zod schemas, and the additions above. Built once, on the first request for it.
 */
export function swaggerOptions(deps: OpenApiDeps): SwaggerOptions {
  const transform = createJsonSchemaTransform({ schemaRegistry: componentRegistry, skipList: [] });
  const transformObject = createJsonSchemaTransformObject({ schemaRegistry: componentRegistry });
  return {
    openapi: base(),
    hideUntagged: false,
    transform,
    transformObject: (input) => finish(transformObject(input), deps),
  };
}

function finish(doc: Json, deps: OpenApiDeps): Json {
  const types = deps.catalogue.list();
  const components = doc.components as { schemas: Record<string, Json> };
  const schemas = tidy(components.schemas) as Record<string, Json>;
  schemas.WebhookSettings = tidy(toJsonSchema(webhookSchema({ allowPrivate: deps.allowPrivate }))) as Json;
  for (const t of types) {
    const body = tidy(toJsonSchema(submitSchema(t, { allowPrivate: deps.allowPrivate }))) as Json;
    const props = body.properties as Json | undefined;
    if (props?.webhook) props.webhook = ref('schemas', 'WebhookSettings');
    schemas[`Submit${pascal(t.name)}`] = { title: `${t.name} submit body`, description: t.description, ...body };
  }
  batchItemSchemas(types, schemas);
  components.schemas = schemas;
  doc.jsonSchemaDialect = 'https://spec.openapis.org/oas/3.1/dialect/base';

  const paths = doc.paths as Record<string, Record<string, Json>>;
  for (const [path, item] of Object.entries(paths)) {
    for (const op of Object.values(item)) {
      finishParameters(op);
      finishOperation(op, path.startsWith(`${API}/`) && op.operationId !== 'getOpenApi');
    }
  }
  const batch = paths[`${API}/jobs/batch`]?.post;
  const jobs = (batch?.requestBody as { content: Record<string, { schema: Json }> } | undefined)?.content[
    'application/json'
  ]?.schema.properties as Record<string, Json> | undefined;
  if (jobs?.jobs) jobs.jobs.items = ref('schemas', 'BatchItem');
  const template = paths[SUBMIT_TEMPLATE]?.post;
  Reflect.deleteProperty(paths, SUBMIT_TEMPLATE);
  if (template) Object.assign(paths, submitOperations(types, template));
  doc.webhooks = webhookOperations(deps);
  const events = paths[`${API}/jobs/{uuid}/events`]?.get;
  if (events) {
    events.description = `${String(events.description)} More than ${deps.maxStreamsPerOwner} open streams per owner answer 429.`;
  }
  // The transform renders an input twin (`JobInput`…) of every component; only request bodies would use them.
  const twins = new Set(COMPONENT_IDS.map((id) => `${id}Input`));
  const used = JSON.stringify({
    ...doc,
    components: { ...components, schemas: Object.fromEntries(Object.entries(schemas).filter(([k]) => !twins.has(k))) },
  });
  if (![...twins].some((t) => used.includes(`"#/components/schemas/${t}"`)))
    for (const t of twins) Reflect.deleteProperty(schemas, t);
  return doc;
}

/**
 * The items of POST /jobs/batch: each submit body (`SubmitX`) with an optional `idempotency_key`
 * of its own, as `BatchItemX`, and `BatchItem`, one of them chosen by `job_type`.
 */
function batchItemSchemas(types: JobType[], schemas: Record<string, Json>): void {
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

/** The document's fixed parts (paths come from the routes). */
function base(): Json {
  return {
    openapi: '3.1.0',
    info: {
      title: 'media-jobs API',
      version: packageVersion(),
      summary: 'Asynchronous media job service',
      description: OVERVIEW,
      contact: { name: 'media-jobs maintainers' },
      license: { name: 'MIT', identifier: 'MIT' },
    },
    jsonSchemaDialect: 'https://spec.openapis.org/oas/3.1/dialect/base',
    servers: [{ url: '/', description: 'This server' }],
    security: [{ bearerAuth: [] }],
    tags: [
      { name: 'Jobs', description: 'Submit, follow, cancel and fetch results.' },
      { name: 'Job types', description: 'What can be submitted.' },
      { name: 'Webhooks', description: 'Notifications of terminal states, and their delivery history.' },
      {
        name: 'Webhook endpoints',
        description:
          "An owner's registered endpoints: every job's terminal events, Standard Webhooks signatures, rotation.",
      },
      { name: 'Results', description: 'Signed result downloads (no API key).' },
      {
        name: 'Remote workers',
        description:
          'The protocol remote workers speak to serve declared job types (docs/workers.md); worker tokens only.',
      },
      { name: 'Operations', description: 'Health and metrics (no API key).' },
      { name: 'Meta', description: 'This document and its viewer.' },
    ],
    components: {
      securitySchemes: {
        bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key: `Authorization: Bearer <API key>`.' },
        workerToken: {
          type: 'http',
          scheme: 'bearer',
          description:
            'A remote worker token (`mjw_…`, from `media-jobs workers create-token`); accepted only on /api/v1/worker.',
        },
      },
      responses: errorResponses(),
      parameters: {
        'Idempotency-Key': {
          name: 'Idempotency-Key',
          in: 'header',
          required: false,
          description:
            "1 to 255 printable ASCII characters, e.g. a UUID. Kept 24 hours; scoped to the API key's owner.",
          schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7E]+$' },
        },
        'X-Request-Id': {
          name: 'X-Request-Id',
          in: 'header',
          required: false,
          description: 'Your id for this request (1–128 of `A-Za-z0-9._:@/+=-`); echoed back, else one is made.',
          schema: { type: 'string', maxLength: 128 },
        },
      },
      headers: {
        'X-Request-Id': {
          description: "The request id (echoed or generated). On an idempotent replay, the original request's id.",
          schema: { type: 'string' },
        },
        'Idempotent-Replayed': {
          description: '`true` when this is the stored response of an earlier request with the same Idempotency-Key.',
          schema: { type: 'string', enum: ['true'] },
        },
        'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer', minimum: 0 } },
        RateLimit: {
          description:
            'What is left of the current window (IETF RateLimit header fields), when rate limiting is on: `"<policy>";r=<remaining>;t=<seconds to reset>`, e.g. `"submit";r=57;t=42`. Policies: `submit`, `read`, `write`; limits are per API key.',
          schema: { type: 'string' },
        },
        'RateLimit-Policy': {
          description:
            'The quota (IETF RateLimit header fields), when rate limiting is on: `"<policy>";q=<requests>;w=<window seconds>`, e.g. `"submit";q=60;w=60`.',
          schema: { type: 'string' },
        },
        'RateLimit-Limit': {
          description: 'Requests per window of the policy that counted this request (the older IETF draft field).',
          schema: { type: 'integer', minimum: 0 },
        },
        'RateLimit-Remaining': {
          description:
            'What is left of the window (the older IETF draft field). A batch refused for being over what is left says what is left.',
          schema: { type: 'integer', minimum: 0 },
        },
        'RateLimit-Reset': {
          description: 'Seconds until the window resets (the older IETF draft field).',
          schema: { type: 'integer', minimum: 0 },
        },
      },
    },
  };
}
