/**
 * Every move of a job, described once (pg-boss's frozen state list, BullMQ's one script per
 * transition): the statuses it leaves and the one it enters, who may make it (its guard), the
 * status_detail it shows, the columns it writes, its attempts rule, and whether it waits out a
 * database outage. Everything else is derived from these records: the transition table
 * (`canTransition`), the SQL conditions and writes (`guardOf`, `writesOf`, which the store turns
 * into `UPDATE … WHERE status IN (from)`), and the effects (`effectsOf`: the webhook outbox row of a
 * terminal move, the signals). `JobLifecycle` submits a request for one of these and the batch
 * writer applies it; nothing else changes a job's status.
 *
 * To add a transition: add its record here (its request type is the record's type argument) and
 * give JobLifecycle a method that submits it.
 */
import type { Kysely } from 'kysely';
import {
  JOB_STATUSES,
  TERMINAL_STATUSES,
  WAITING_FOR_WORKER,
  isTerminalStatus,
  waitingForWorker,
  type ErrorType,
  type JobProgress,
  type JobStatus,
} from '../contract/api.js';
import type { SignalName } from '../signals.js';
import type { IdempotencyRow } from '../store/idempotency.js';
import type { AttemptsRule, JobRow, NewJob } from '../store/jobs.js';
import type { Database } from '../store/schema.js';

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

/** Who may make a single-job move; the store adds each as an SQL condition. */
export interface Guard {
  leaseOwner?: string;
  owner?: string;
  leaseExpiredBefore?: number;
  deadlineBefore?: number;
}

/** One move. `Req` is what its request carries besides `move` and `at`; `Out` what it answers. */
interface MoveRecord<Req> {
  from: readonly JobStatus[];
  /** `unchanged`: the job keeps its status (a purge of a finished job's data). */
  to: JobStatus | 'unchanged';
  guard?: (c: Req & { at: number }) => Guard;
  /** The status_detail it shows (none: the detail stays, or the store's statement sets it). */
  detail?: string | ((c: Req & { at: number }) => string | undefined);
  /** Columns written beyond status, detail, attempts and what `writesOf` derives from `to`. */
  columns?: (c: Req & { at: number }) => Partial<JobRow>;
  /** `count`: the move starts an attempt; `uncount`: the attempt it ends does not count. */
  attempts?: AttemptsRule;
  /** A worker's finish: it waits out a database outage (the lease decides after that). */
  patient?: true;
}

/** The record, with its request and answer types carried along (types only). */
type Typed<Req, Out> = MoveRecord<Req> & { readonly types?: { req: Req; out: Out } };

/** `move<Request, Answer>()({ … })`: the record keeps its literal statuses, and carries its types. */
const move =
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- Out is carried as a type only (Outcomes)
  <Req extends object, Out = JobRow | undefined>() =>
    <const R extends MoveRecord<Req>>(record: R): R & Typed<Req, Out> =>
      Object.freeze(record);

type Lease = { held: Held };
const byLease = ({ held }: Lease): Guard => ({ leaseOwner: held.lease });
const byLeaseExpiry = ({ at }: { at: number }): Guard => ({ leaseExpiredBefore: at });
const byDeadline = ({ at }: { at: number }): Guard => ({ deadlineBefore: at });

/** The moves of the job lifecycle, by name. */
export const MOVES = Object.freeze({
  /** A new job enters the queue (it has no state before). */
  create: move<{ jobs: ReadonlyArray<NewEntry> }, boolean[]>()({ from: [], to: 'queued', detail: WAITING_FOR_WORKER }),
  /** A worker takes queued jobs (fair order) under a fresh lease. */
  claim: move<{ leaseOwner: string; jobTypes: readonly string[]; limit: number }, JobRow[]>()({
    from: ['queued'],
    to: 'processing',
    detail: 'starting',
    attempts: 'count',
  }),
  /** The lease holder extends its lease (and may show a new status_detail and progress). */
  renew: move<Lease & { detail?: string; progress?: JobProgress }, string | undefined>()({
    from: ['processing'],
    to: 'processing',
    guard: byLease,
    detail: (c) => c.detail,
  }),
  complete: move<Lease & { result: ResultInfo }>()({
    from: ['processing'],
    to: 'completed',
    guard: byLease,
    detail: 'done',
    columns: ({ result }) => ({
      result_key: result.key,
      result_content_type: result.contentType,
      result_size: result.size,
    }),
    patient: true,
  }),
  fail: move<Lease & { failure: Failure }>()({
    from: ['processing'],
    to: 'failed',
    guard: byLease,
    detail: ({ failure }) => failure.detail ?? 'failed',
    columns: ({ failure }) => ({ error_type: failure.errorType, error_message: failure.message }),
    patient: true,
  }),
  /** A remote worker's retryable failure with attempts left: back to the queue, counted. */
  retry: move<Lease & { attempt: number; message: string }>()({
    from: ['processing'],
    to: 'queued',
    guard: byLease,
    detail: (c) => waitingForWorker(`attempt ${c.attempt} failed: ${c.message.slice(0, 200)}`),
    patient: true,
  }),
  /** A worker hands its job back (stopping, or staging failed on our side): not counted. */
  handBack: move<Lease & { why?: string }>()({
    from: ['processing'],
    to: 'queued',
    guard: byLease,
    detail: (c) => waitingForWorker(c.why),
    attempts: 'uncount',
    patient: true,
  }),
  /** The owner cancels an active job. */
  cancel: move<{ uuid: string; owner: string }>()({
    from: ['queued', 'processing'],
    to: 'cancelled',
    guard: ({ owner }) => ({ owner }),
    detail: 'cancelled by the client',
  }),
  /** A lease ran out (its worker died or hung) with attempts left: back to the queue, at its old place. */
  recover: move<{ uuid: string }>()({
    from: ['processing'],
    to: 'queued',
    guard: byLeaseExpiry,
    detail: waitingForWorker('the previous worker stopped responding'),
  }),
  /** A lease ran out once too often (JOB_MAX_ATTEMPTS): failed. */
  exhaust: move<{ uuid: string; maxAttempts: number }>()({
    from: ['processing'],
    to: 'failed',
    guard: byLeaseExpiry,
    detail: 'failed',
    columns: ({ maxAttempts }) => ({
      error_type: 'internal_error',
      error_message: `the worker running this job stopped responding ${maxAttempts} times`,
    }),
  }),
  /** A queued job's deadline (cancel_after) passed. */
  expireQueued: move<{ uuid: string }>()({
    from: ['queued'],
    to: 'cancelled',
    guard: byDeadline,
    detail: 'deadline passed while queued',
  }),
  /** A running job's deadline passed: cancelled, and its worker aborts (job-cancelled, a failed renewal). */
  expireRunning: move<{ uuid: string }>()({
    from: ['processing'],
    to: 'cancelled',
    guard: byDeadline,
    detail: 'deadline passed while processing',
  }),
  /**
   * A finished job's data is erased (DELETE, retention): input, webhook URL and secret, delivery
   * bodies; its result stops being handed out. The blobs are deleted next, then `purged` says so.
   * Answers the job (its result_key still set, for the blob deletion) when it was a finished job
   * of this owner not yet purged.
   */
  purge: move<{ uuid: string; owner?: string }>()({
    from: TERMINAL_STATUSES,
    to: 'unchanged',
    guard: ({ owner }) => (owner === undefined ? {} : { owner }),
  }),
  /** The blobs are gone: the job becomes a tombstone (`data_removed`). */
  purged: move<{ uuid: string }, boolean>()({ from: TERMINAL_STATUSES, to: 'unchanged' }),
});

type Moves = typeof MOVES;
export type MoveName = keyof Moves;
type TypesOf<K extends MoveName> = NonNullable<Moves[K]['types']>;
/** A request for move K; `at` is when it was asked. */
export type ChangeOf<K extends MoveName> = { move: K; at: number } & TypesOf<K>['req'];
/** A request to change one job's state (or, for a claim, to take some). */
export type Change = { [K in MoveName]: ChangeOf<K> }[MoveName];
/** What each move answers its caller. */
export type Outcomes = { [K in MoveName]: TypesOf<K>['out'] };

const record = (name: MoveName): MoveRecord<object> => MOVES[name] as MoveRecord<object>;

/**
 * Whether `to` may follow `from`: some move leaves `from` for `to`. A terminal status never
 * changes; `unchanged` (the purge of a finished job's data) keeps it.
 */
export function canTransition(from: JobStatus, to: JobStatus | 'unchanged'): boolean {
  return (Object.keys(MOVES) as MoveName[]).some((n) => record(n).from.includes(from) && record(n).to === to);
}

/** The legal status pairs, derived from the moves (for docs and tests). */
export const TRANSITIONS: ReadonlyArray<readonly [JobStatus, JobStatus]> = JOB_STATUSES.flatMap((f) =>
  JOB_STATUSES.filter((t) => canTransition(f, t)).map((t) => [f, t] as const),
);

/** Who may make a change: the lease holder, the owner, a lease's expiry or a deadline. */
export function guardOf(change: Change): Guard {
  return record(change.move).guard?.(change) ?? {};
}

/**
 * What a single-job change writes besides status and updated_at: its detail and columns; a move
 * that leaves `processing` ends the lease (and the progress), a terminal one stamps finished_at.
 */
export function writesOf(change: Change): { set: Partial<JobRow>; attempts?: AttemptsRule } {
  const r = record(change.move);
  const detail = typeof r.detail === 'function' ? r.detail(change) : r.detail;
  const terminal = isTerminalStatus(r.to);
  return {
    set: {
      ...(detail === undefined ? {} : { status_detail: detail }),
      ...r.columns?.(change),
      ...(r.to === 'queued' || terminal ? { lease_owner: null, lease_expires_at: null, progress: null } : {}),
      ...(terminal ? { finished_at: change.at } : {}),
    },
    attempts: r.attempts,
  };
}

/** Whether a change waits out a database outage (a worker's finish). */
export const isPatient = (change: Change): boolean => record(change.move).patient === true;

/**
 * A job's effects once its move is written: a terminal move gets its webhook outbox row, and
 * says job-finished (and job-cancelled, which aborts a running worker); a move back to the queue
 * wakes the workers.
 */
export function effectsOf(to: JobStatus | 'unchanged', uuid: string) {
  const signals: Array<readonly [SignalName, string]> = [];
  const terminal = isTerminalStatus(to);
  if (to === 'cancelled') signals.push(['job-cancelled', uuid]);
  if (terminal) signals.push(['job-finished', uuid]);
  if (to === 'queued') signals.push(['job-queued', '']);
  return { outbox: terminal, signals };
}

/** The attempts rule: a job may be claimed again while it has used fewer than JOB_MAX_ATTEMPTS claims. */
export const attemptsLeft = (job: Pick<JobRow, 'attempts'>, maxAttempts: number): boolean => job.attempts < maxAttempts;

/** The columns a submit leaves to the create move (status, detail, attempts, and nothing yet). */
export type Submitted = Omit<
  NewJob,
  | 'status'
  | 'status_detail'
  | 'attempts'
  | 'error_type'
  | 'error_message'
  | 'result_key'
  | 'result_content_type'
  | 'result_size'
  | 'result_deleted_at'
  | 'lease_owner'
  | 'lease_expires_at'
  | 'started_at'
  | 'finished_at'
  | 'purge_at'
  | 'data_removed_at'
  | 'progress'
>;

/** A new job's row as the create move makes it. */
export function newJob<S extends Submitted>(submitted: S) {
  const { to, detail } = MOVES.create;
  return {
    ...submitted,
    status: to as JobStatus,
    status_detail: detail as string,
    attempts: 0,
    error_type: null,
    error_message: null,
    result_key: null,
    result_content_type: null,
    result_size: null,
    result_deleted_at: null,
    lease_owner: null,
    lease_expires_at: null,
    started_at: null,
    finished_at: null,
    purge_at: null,
    data_removed_at: null,
    progress: null,
  } satisfies NewJob;
}
