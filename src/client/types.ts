/**
 * The shapes the media-jobs API answers with, for client code. Kept free of the service's
 * runtime; test/openapi checks at compile time that they match what the server builds.
 */

export type JobStatus = 'queued' | 'processing' | 'completed' | 'failed' | 'cancelled';
export type TerminalStatus = 'completed' | 'failed' | 'cancelled';
export type ErrorType = 'media_fetch_failed' | 'invalid_media' | 'processing_error' | 'timeout' | 'internal_error';
export type EventType = 'job.completed' | 'job.failed' | 'job.cancelled';
export type SlotName = 'source' | 'target' | 'reference' | 'audio';

export const TERMINAL: readonly TerminalStatus[] = ['completed', 'failed', 'cancelled'];
export const isTerminalStatus = (s: string): s is TerminalStatus => (TERMINAL as readonly string[]).includes(s);

/** A job (`data` of submit, status and cancel). More fields may be added. */
export interface ApiJob {
  uuid: string;
  job_type: string;
  model: string;
  status: JobStatus;
  status_detail: string;
  /** Set when the job failed (e.g. `media_fetch_failed`), else null. */
  error_type: string | null;
  error_message: string | null;
  result_ready: boolean;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
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

export interface SlotSpec {
  required: boolean;
  min: number;
  max: number;
  accepts: 'image' | 'audio' | 'video';
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

export interface WebhookSettings {
  url: string;
  /** When given, deliveries carry X-Service-Signature (verify with verifyWebhook). */
  secret?: string;
  /** Defaults to all three. */
  events?: EventType[];
}

/** The submit body, without `job_type` (the client fills it in from the job type). */
export interface SubmitBody<I extends Record<string, unknown> = Record<string, unknown>> {
  model: string;
  /** Media slots (`source`, `target`, `reference`, `audio`: a URL or an array of URLs) and options. */
  input: I;
  webhook?: WebhookSettings;
}

export interface DeliveryAttempt {
  attempt: number;
  started_at: string;
  http_status: number | null;
  error: string | null;
  duration_ms: number;
  ok: boolean;
  manual: boolean;
}

/** One webhook event of a job and its delivery attempts. */
export interface Delivery {
  event_id: string;
  event_type: string;
  url: string;
  state: 'pending' | 'delivered' | 'failed';
  attempts: DeliveryAttempt[];
  next_attempt_at: string | null;
  created_at: string;
}
