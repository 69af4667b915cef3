import type { Generated } from 'kysely';

import type { JobStatus } from '../contract/api.js';

/** The job states are stored as the contract's strings; jobs/states.ts owns which transitions are legal. */

/** Times are Unix milliseconds in BIGINT columns on both dialects; JSON is stored as TEXT. */
export interface ApiKeysTable {
  id: string;
  owner: string;
  key_hash: string;
  /** First characters of the key, shown by `keys list` so an operator can tell keys apart. */
  prefix: string;
  created_at: number;
  revoked_at: number | null;
}

export interface JobsTable {
  uuid: string;
  owner: string;
  job_type: string;
  model: string;
  input: string;
  webhook: string | null;
  status: JobStatus;
  status_detail: string;
  error_type: string | null;
  error_message: string | null;
  result_key: string | null;
  result_content_type: string | null;
  result_size: number | null;
  result_deleted_at: number | null;
  attempts: Generated<number>;
  lease_owner: string | null;
  lease_expires_at: number | null;
  /**
   * Virtual start time (start-time fair queueing): claims take queued jobs in (vtime, created_at,
   * uuid) order. A submit gets max(head of the queue, owner's last queued vtime + 1), so one
   * owner's burst interleaves with everyone else's jobs instead of standing in front of them.
   */
  vtime: Generated<number>;
  created_at: number;
  started_at: number | null;
  finished_at: number | null;
  updated_at: number;
  /** cancel_after: past it an active job is cancelled (housekeeping, by the partial index jobs_deadlines). */
  deadline: Generated<number | null>;
  /** −600..600 s; `rank` = created_at − priority × 1000 orders an owner's own queued jobs. */
  priority: Generated<number>;
  rank: Generated<number>;
  /** The job's own `retention` (ms), else RESULT_RETENTION applies. */
  retention_ms: Generated<number | null>;
  /** When the job's data is (or was, for a purge that must be retried) due to be purged; null once purged. */
  purge_at: Generated<number | null>;
  /** Set once the purge finished: input, webhook and result are gone (the tombstone's data_removed). */
  data_removed_at: Generated<number | null>;
  /** JSON of the latest structured progress, or null. */
  progress: Generated<string | null>;
}

export interface IdempotencyKeysTable {
  owner: string;
  key: string;
  fingerprint: string;
  response_status: number;
  response_body: string;
  request_id: string;
  job_uuid: string;
  created_at: number;
  expires_at: number;
}

export interface SettingsTable {
  name: string;
  value: string;
}

export interface WebhookEventsTable {
  event_id: string;
  job_uuid: string;
  owner: string;
  event_type: string;
  url: string;
  /** Origin of `url` (scheme://host:port): the unit of per-destination fairness. */
  destination: string | null;
  secret: string | null;
  /** The exact bytes every attempt sends. */
  body: string;
  /** `skipped`: its owner endpoint was disabled (POST …/recover queues it again). */
  state: 'pending' | 'delivered' | 'failed' | 'skipped';
  /** The owner endpoint this row delivers to; null for the job's own `webhook` (migration 011). */
  endpoint_id: Generated<string | null>;
  attempts: Generated<number>;
  next_attempt_at: number | null;
  lease_owner: string | null;
  lease_expires_at: number | null;
  created_at: number;
  updated_at: number;
}

/** An owner's webhook endpoint (migration 011): every job's subscribed events go to it. */
export interface WebhookEndpointsTable {
  id: string;
  owner: string;
  url: string;
  /** JSON array of event types. */
  events: string;
  description: string;
  /** `whsec_` + base64 of 24 random bytes; signs every delivery. */
  secret: string;
  /** The secret before the last rotation, honoured (a second signature) until previous_secret_expires_at. */
  previous_secret: string | null;
  previous_secret_expires_at: number | null;
  status: 'enabled' | 'disabled';
  disabled_reason: string | null;
  disabled_at: number | null;
  /** Time of the first failed attempt after its last success; null while it succeeds. */
  failing_since: number | null;
  created_at: number;
  updated_at: number;
}

export interface WebhookAttemptsTable {
  id: Generated<number>;
  event_id: string;
  attempt: number;
  started_at: number;
  duration_ms: number;
  http_status: number | null;
  error: string | null;
  ok: number;
  /** Set when the attempt was asked for by POST …/redeliver rather than the schedule. */
  manual: number;
}

/** Jobs per active state, maintained by triggers (sharded on PostgreSQL so writers rarely meet). */
export interface QueueCountsTable {
  shard: number;
  queued: number;
  processing: number;
}

/**
 * The cluster's job totals (migration 010), kept by the same triggers as queue_counts: per job
 * type, `submitted` (every inserted job) and each terminal status (`completed`, `failed`,
 * `cancelled`: jobs that reached it). Rows are summed over shards when read.
 */
export interface JobTotalsTable {
  shard: number;
  job_type: string;
  event: string;
  n: number;
}

/**
 * Finished jobs per minute (by `finished_at`), a ring of 60 slots per shard (`slot` = minute mod
 * 60, `minute` = the minute the slot holds now): the operator view's throughput across processes.
 */
export interface JobFinishMinutesTable {
  shard: number;
  slot: number;
  minute: number;
  n: number;
}

/** Operator tokens (`mja_…`), for /admin/api and the dashboard's operator view. */
export interface AdminTokensTable {
  id: string;
  token_hash: string;
  prefix: string;
  created_at: number;
  revoked_at: number | null;
}

/** Remote worker tokens (`mjw_…`), for /api/v1/worker only; `job_types` (JSON array) limits what they claim. */
export interface WorkerTokensTable {
  id: string;
  name: string;
  token_hash: string;
  prefix: string;
  /** JSON array of job type names, or null: every declared remote type. */
  job_types: string | null;
  created_at: number;
  revoked_at: number | null;
  last_seen_at: number | null;
}

/**
 * Blobs a remote job's attempt owns: its staged input copies and its uploaded output. Rows live
 * only while the attempt does (deleted when it ends, or swept by housekeeping), so the table holds
 * about one row per running remote job, never the job history.
 */
export interface StagedBlobsTable {
  key: string;
  job_uuid: string;
  lease_owner: string;
  kind: 'input' | 'output';
  content_type: string;
  size: number;
  created_at: number;
}

export interface Database {
  api_keys: ApiKeysTable;
  jobs: JobsTable;
  idempotency_keys: IdempotencyKeysTable;
  settings: SettingsTable;
  webhook_events: WebhookEventsTable;
  webhook_attempts: WebhookAttemptsTable;
  webhook_endpoints: WebhookEndpointsTable;
  queue_counts: QueueCountsTable;
  job_totals: JobTotalsTable;
  job_finish_minutes: JobFinishMinutesTable;
  admin_tokens: AdminTokensTable;
  worker_tokens: WorkerTokensTable;
  staged_blobs: StagedBlobsTable;
}
