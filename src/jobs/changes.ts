/**
 * Every change of a job's state, described once. A change names the states it leaves and the
 * state it enters (checked against the one transition table of states.ts when this module loads),
 * who may make it (the lease holder, the owner, or the lease's expiry), and the columns it writes.
 * `JobLifecycle` turns a request into one of these and the batch writer applies it with its outbox
 * row and NOTIFY; nothing else changes a job's status.
 *
 * To add a transition: allow it in states.ts's table, describe it here, and give JobLifecycle a
 * method that submits it.
 */
import type { Kysely } from 'kysely';
import type { JobRow, NewJob } from '../store/jobs.js';
import type { Database } from '../store/schema.js';
import type { IdempotencyRow } from '../store/idempotency.js';
import type { ErrorType, JobProgress } from '../contract.js';
import { assertTransitions, type JobStatus } from './states.js';

/** A move between states: the statuses a job may be in, the status it gets. */
export interface Move {
  from: readonly JobStatus[];
  /** `unchanged`: the job keeps its status (a purge of a finished job's data). */
  to: JobStatus | 'unchanged';
}

/** The moves of the job lifecycle, by name. */
export const MOVES = {
  /** A new job enters the queue (it has no state before). */
  create: { from: [], to: 'queued' },
  /** A worker takes queued jobs (fair order) under a fresh lease. */
  claim: { from: ['queued'], to: 'processing' },
  /** The lease holder extends its lease (and may show a new status_detail). */
  renew: { from: ['processing'], to: 'processing' },
  complete: { from: ['processing'], to: 'completed' },
  fail: { from: ['processing'], to: 'failed' },
  /** A remote worker's retryable failure with attempts left: back to the queue, counted. */
  retry: { from: ['processing'], to: 'queued' },
  /** A stopping worker hands its job back: back to the queue, not counted. */
  handBack: { from: ['processing'], to: 'queued' },
  /** The owner cancels an active job. */
  cancel: { from: ['queued', 'processing'], to: 'cancelled' },
  /** A lease ran out (its worker died or hung): back to the queue, at its old place. */
  recover: { from: ['processing'], to: 'queued' },
  /** A lease ran out once too often (JOB_MAX_ATTEMPTS): failed. */
  exhaust: { from: ['processing'], to: 'failed' },
  /** A queued job's deadline (cancel_after) passed. */
  expireQueued: { from: ['queued'], to: 'cancelled' },
  /** A running job's deadline passed: cancelled, and its worker aborts (job-cancelled, a failed renewal). */
  expireRunning: { from: ['processing'], to: 'cancelled' },
  /**
   * A finished job's data is erased (DELETE, retention): input, webhook URL and secret, delivery
   * bodies; its result stops being handed out. The blobs are deleted next, then `purged` says so.
   */
  purge: { from: ['completed', 'failed', 'cancelled'], to: 'unchanged' },
  /** The blobs are gone: the job becomes a tombstone (`data_removed`). */
  purged: { from: ['completed', 'failed', 'cancelled'], to: 'unchanged' },
} as const satisfies Record<string, Move>;

export type MoveName = keyof typeof MOVES;

for (const [name, move] of Object.entries(MOVES)) {
  try {
    assertTransitions(move.from, move.to);
  } catch (err) {
    throw new Error(`jobs/changes.ts: move "${name}" is not in the transition table`, { cause: err });
  }
}

/** What a worker holds: the job, the claim's lease token, and when the attempt started. */
export interface Held {
  uuid: string;
  lease: string;
  job_type: string;
  /** When this attempt started (for the processing-time histogram). */
  startedAt?: number;
}

export interface ResultInfo {
  key: string;
  contentType: string;
  size: number;
}

export interface Failure {
  errorType: ErrorType;
  message: string;
  /** status_detail; default "failed". */
  detail?: string;
}

/** Runs first in a create's transaction (the idempotency key's reservation); false vetoes the insert. */
export type Reserve = (trx: Kysely<Database>) => Promise<boolean>;

/**
 * One job of a create: with `reserve` (a single submit's key) or `key` (a batch item's key record,
 * reserved with the batch's others in multi-row statements); a key taken by a live record vetoes it.
 */
export interface NewEntry {
  job: NewJob;
  reserve?: Reserve;
  key?: IdempotencyRow;
}

/** A request to change one job's state (or, for a claim, to take some); `at` is when it was asked. */
export type Change =
  | { move: 'create'; at: number; jobs: ReadonlyArray<NewEntry> }
  | { move: 'claim'; at: number; leaseOwner: string; jobTypes: readonly string[]; limit: number }
  | { move: 'renew'; at: number; held: Held; detail?: string; progress?: JobProgress }
  | { move: 'complete'; at: number; held: Held; result: ResultInfo }
  | { move: 'fail'; at: number; held: Held; failure: Failure }
  | { move: 'retry'; at: number; held: Held; detail: string }
  | { move: 'handBack'; at: number; held: Held; attempts: number; detail: string }
  | { move: 'cancel'; at: number; uuid: string; owner: string }
  | { move: 'recover'; at: number; uuid: string }
  | { move: 'exhaust'; at: number; uuid: string; maxAttempts: number }
  | { move: 'expireQueued'; at: number; uuid: string }
  | { move: 'expireRunning'; at: number; uuid: string }
  | { move: 'purge'; at: number; uuid: string; owner?: string }
  | { move: 'purged'; at: number; uuid: string };

/** What each change answers its caller. */
export interface Outcomes {
  /** Per job: inserted, or vetoed by its reserve (its idempotency key is taken). */
  create: boolean[];
  claim: JobRow[];
  /** The job's type while the lease holds (remote heartbeats check the type's timeout); else undefined. */
  renew: string | undefined;
  complete: JobRow | undefined;
  fail: JobRow | undefined;
  retry: JobRow | undefined;
  handBack: JobRow | undefined;
  cancel: JobRow | undefined;
  recover: JobRow | undefined;
  exhaust: JobRow | undefined;
  expireQueued: JobRow | undefined;
  expireRunning: JobRow | undefined;
  /** The job (its result_key still set, for the blob deletion) when it was a finished job of this owner not yet purged. */
  purge: JobRow | undefined;
  purged: boolean;
}

/** The column writes of a single-job change beyond status (the store adds updated_at; terminal ones finished_at, and clear the lease and progress). */
export function columnsOf(change: Change): Partial<JobRow> {
  switch (change.move) {
    case 'complete':
      return {
        status_detail: 'done',
        result_key: change.result.key,
        result_content_type: change.result.contentType,
        result_size: change.result.size,
      };
    case 'fail':
      return {
        status_detail: change.failure.detail ?? 'failed',
        error_type: change.failure.errorType,
        error_message: change.failure.message,
      };
    case 'retry':
      return { status_detail: change.detail, lease_owner: null, lease_expires_at: null, progress: null };
    case 'handBack':
      return {
        status_detail: change.detail,
        lease_owner: null,
        lease_expires_at: null,
        progress: null,
        attempts: Math.max(0, change.attempts - 1),
      };
    case 'expireQueued':
      return { status_detail: 'deadline passed while queued' };
    case 'expireRunning':
      return { status_detail: 'deadline passed while processing' };
    case 'cancel':
      return { status_detail: 'cancelled by the client' };
    case 'recover':
      return {
        status_detail: 'waiting for a worker (the previous worker stopped responding)',
        lease_owner: null,
        lease_expires_at: null,
        progress: null,
      };
    case 'exhaust':
      return {
        status_detail: 'failed',
        error_type: 'internal_error',
        error_message: `the worker running this job stopped responding ${change.maxAttempts} times`,
      };
    default:
      return {};
  }
}

/** Who may make a single-job change: the lease holder, the owner, a lease's expiry or a deadline. */
export function guardOf(change: Change): {
  leaseOwner?: string;
  owner?: string;
  leaseExpiredBefore?: number;
  deadlineBefore?: number;
} {
  switch (change.move) {
    case 'complete':
    case 'fail':
    case 'retry':
    case 'handBack':
      return { leaseOwner: change.held.lease };
    case 'cancel':
      return { owner: change.owner };
    case 'recover':
    case 'exhaust':
      return { leaseExpiredBefore: change.at };
    case 'expireQueued':
    case 'expireRunning':
      return { deadlineBefore: change.at };
    case 'purge':
      return change.owner === undefined ? {} : { owner: change.owner };
    default:
      return {};
  }
}
