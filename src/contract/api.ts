/**
 * The contract, public API: the constants and shapes of /api/v1 (statuses, error types, slots,
 * the job, batch, result and job-type objects), stated once. The server, the TypeScript client,
 * the CLI and the dashboard import them from here directly (a lint rule forbids re-exporting
 * them elsewhere); contract/ imports nothing outside itself, so a client loads none of the service.
 * test/openapi checks at compile time that the shapes match what the server builds.
 */
import type { WebhookSettings } from './webhook.js';

/** Job statuses; `queued` and `processing` are active, the other three terminal (never change again). */
export const JOB_STATUSES = ['queued', 'processing', 'completed', 'failed', 'cancelled'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];
export const ACTIVE_STATUSES = ['queued', 'processing'] as const satisfies readonly JobStatus[];
export const TERMINAL_STATUSES = ['completed', 'failed', 'cancelled'] as const satisfies readonly JobStatus[];
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];
export const isTerminalStatus = (s: string): s is TerminalStatus =>
  (TERMINAL_STATUSES as readonly string[]).includes(s);

/** The `error_type` values a failed job can carry. */
export const ERROR_TYPES = [
  'media_fetch_failed',
  'invalid_media',
  'processing_error',
  'timeout',
  'internal_error',
] as const;
export type ErrorType = (typeof ERROR_TYPES)[number];

/**
 * A job id shortened for people (the dashboard, the CLI's progress line): its last 8 hex digits.
 * Job ids are UUIDv7s, whose first digits are the creation time (shared by every job of a minute);
 * the last ones are random.
 */
export const shortJobId = (uuid: string): string => uuid.slice(-8);

/** What a missing job and another owner's job both answer, word for word (404). */
export const JOB_NOT_FOUND = 'job not found';

/** The media slots under `input`. */
export const SLOT_NAMES = ['source', 'target', 'reference', 'audio'] as const;
export type SlotName = (typeof SLOT_NAMES)[number];
export const isSlotName = (k: string): k is SlotName => (SLOT_NAMES as readonly string[]).includes(k);

/** A job (`data` of submit, status and cancel). More fields may be added. */
export interface ApiJob {
  uuid: string;
  job_type: string;
  model: string;
  status: JobStatus;
  status_detail: string;
  /** Set when the job failed (e.g. `media_fetch_failed`), else null. */
  error_type: ErrorType | null;
  error_message: string | null;
  result_ready: boolean;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  /** When the job is cancelled if it has not finished (`cancel_after` at submit), else null. */
  deadline: string | null;
  /** −600..600: among the same owner's queued jobs, taken as if submitted this many seconds earlier. */
  priority: number;
  /** What the worker reports, or null; never sent in webhooks. */
  progress: JobProgress | null;
  /** True once the job's data (input, webhook, result) was deleted (DELETE or retention); the job stays as a tombstone. */
  data_removed: boolean;
  /** The job's own `retention` as given at submit (e.g. `"1h"`), or null: the service's RESULT_RETENTION applies. */
  retention: string | null;
  /** When the job's data will be purged: set once it is terminal, null before and once purged. */
  purge_at: string | null;
}

/** Structured progress: `{"stage":"swapping faces","percent":34.2,"current":41,"total":120}`. */
export interface JobProgress {
  stage: string;
  /** 0–100, or null when the stage has no measure. */
  percent: number | null;
  current?: number;
  total?: number;
}

/** `priority` bounds, in seconds (Inngest's and Trigger.dev's meaning). */
export const PRIORITY_MIN = -600;
export const PRIORITY_MAX = 600;
/** `cancel_after` bounds, in milliseconds: 1 s to 7 d. */
export const CANCEL_AFTER_MIN_MS = 1_000;
export const CANCEL_AFTER_MAX_MS = 7 * 86_400_000;
/** The request header that is the same as `cancel_after` (Replicate's). */
export const CANCEL_AFTER_HEADER = 'Cancel-After';
/** SSE sends at most one `progress` event per stream this often (the terminal state always). */
export const PROGRESS_EVENT_INTERVAL_MS = 500;
/** Most items of POST /jobs/batch (MAX_BATCH_ITEMS may lower or raise it). */
export const DEFAULT_MAX_BATCH_ITEMS = 1000;

/** One item of `data.items` of POST /jobs/batch: what the item alone would have been answered. */
export interface BatchItemResult {
  code: number;
  message: string;
  /** The HTTP status the item alone would have got (200, 400, 409, …). */
  status: number;
  /** The job, or `{}` for an item that was refused. */
  data: ApiJob | Record<string, never>;
  /** Present (true) when the item is the stored answer of an earlier submit with its idempotency key. */
  replayed?: true;
}

/** `data` of POST /jobs/batch. */
export interface BatchResult {
  items: BatchItemResult[];
}

/** `data` of GET /jobs/{uuid}/result: a signed link that needs no API key. */
export interface ResultLink {
  uuid: string;
  url: string;
  expires_at: string;
  content_type: string;
  size_bytes: number;
}

/** One page of GET /jobs. */
export interface JobList {
  jobs: ApiJob[];
  /** Pass as `cursor` for the next page; null on the last page. */
  next_cursor: string | null;
}

/** The kinds of media a slot accepts (sniffed from the bytes). */
export const MEDIA_KINDS = ['image', 'audio', 'video'] as const;

export interface SlotSpec {
  required: boolean;
  min: number;
  max: number;
  accepts: (typeof MEDIA_KINDS)[number];
  description: string;
}

/** One entry of GET /job-types. */
export interface JobTypeInfo {
  name: string;
  description: string;
  submit_path: string;
  slots: Partial<Record<SlotName, SlotSpec>>;
  models: Array<{ name: string; description: string }>;
  /** JSON Schema of the non-media fields of `input`. */
  options: Record<string, unknown>;
  /** JSON Schema of the whole submit body. */
  body_schema: Record<string, unknown>;
}

/** The submit body, without `job_type` (the client fills it in from the job type). */
export interface SubmitBody<I extends Record<string, unknown> = Record<string, unknown>> {
  model: string;
  /** Media slots (`source`, `target`, `reference`, `audio`: a URL or an array of URLs) and options. */
  input: I;
  webhook?: WebhookSettings;
  /** Cancel the job if it has not finished in this long: `"90s"`, `"5m"`, `"1h30m"` or seconds (1 s to 7 d). */
  cancel_after?: string | number;
  /** Purge the job's data this long after it finished (at most RESULT_RETENTION). */
  retention?: string | number;
  /** −600..600 seconds, within the owner's own jobs. */
  priority?: number;
}

/** One item of POST /jobs/batch: a submit body with its `job_type`, and an optional key of its own. */
export type BatchItem<I extends Record<string, unknown> = Record<string, unknown>> = SubmitBody<I> & {
  job_type: string;
  idempotency_key?: string;
};

/** A queued job's status_detail; a job back in the queue says why in parentheses. */
export const WAITING_FOR_WORKER = 'waiting for a worker';

/** `waiting for a worker (why)`, or the bare sentence without a reason. */
export function waitingForWorker(why?: string): string {
  return why === undefined ? WAITING_FOR_WORKER : `${WAITING_FOR_WORKER} (${why})`;
}
