import { exampleJob, exampleLink, ok } from './examples.js';
import { ref, type Json } from './json.js';

/** Each operation's words: summary, description, the 200's example and extra headers, by operationId. */

export interface Prose {
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
export const PROSE: Record<string, Prose> = {
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
