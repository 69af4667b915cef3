import { sql, type Insertable, type Kysely, type Updateable } from 'kysely';
import type { Database, JobsTable } from './schema.js';
import type { Dialect } from './db.js';
import { assertTransitions, isTerminal, type JobStatus } from '../jobs/states.js';
import type { JobRow } from '../jobs/view.js';
import { terminalEvent } from '../webhooks/events.js';

/** Every job query lives here; callers never write SQL for jobs. */

export async function insertJob(db: Kysely<Database>, row: Insertable<JobsTable>): Promise<void> {
  await db.insertInto('jobs').values(row).execute();
}

/** A job of `owner`; another owner's job is indistinguishable from a missing one. */
export function getJob(db: Kysely<Database>, uuid: string, owner?: string): Promise<JobRow | undefined> {
  let q = db.selectFrom('jobs').selectAll().where('uuid', '=', uuid);
  if (owner !== undefined) q = q.where('owner', '=', owner);
  return q.executeTakeFirst();
}

export interface TransitionSpec {
  from: readonly JobStatus[];
  to: JobStatus;
  owner?: string;
  /** When set, only the worker holding this lease may make the change. */
  leaseOwner?: string;
  /** When set, only if the lease expired before this time (a dead worker's job). */
  leaseExpiredBefore?: number;
  set?: Omit<Updateable<JobsTable>, 'status' | 'uuid'>;
  now: number;
  /** Delay of the first webhook attempt (the schedule's first entry). */
  firstWebhookDelayMs?: number;
}

/**
 * The one place a job changes state: a conditional UPDATE (…WHERE status IN from), and, when the
 * new state is terminal, the webhook event written in the same transaction (outbox), so a crash
 * can delay a webhook but never lose it. Returns the updated row, or undefined when the job was
 * not in one of the `from` states (someone else got there first).
 */
export async function transition(db: Kysely<Database>, uuid: string, spec: TransitionSpec): Promise<JobRow | undefined> {
  assertTransitions(spec.from, spec.to);
  const terminal = isTerminal(spec.to);
  const run = async (trx: Kysely<Database>) => {
    let q = trx
      .updateTable('jobs')
      .set({
        ...spec.set,
        status: spec.to,
        updated_at: spec.now,
        ...(terminal ? { finished_at: spec.now, lease_owner: null, lease_expires_at: null } : {}),
      })
      .where('uuid', '=', uuid)
      .where('status', 'in', spec.from);
    if (spec.owner !== undefined) q = q.where('owner', '=', spec.owner);
    if (spec.leaseOwner !== undefined) q = q.where('lease_owner', '=', spec.leaseOwner);
    if (spec.leaseExpiredBefore !== undefined) q = q.where('lease_expires_at', '<', spec.leaseExpiredBefore);
    const row = await q.returningAll().executeTakeFirst();
    if (row && terminal) {
      const event = terminalEvent(row, spec.now, spec.firstWebhookDelayMs);
      if (event) await trx.insertInto('webhook_events').values(event).execute();
    }
    return row;
  };
  // A transaction only when there may be a second statement.
  return terminal ? db.transaction().execute(run) : run(db);
}

export interface ClaimSpec {
  workerId: string;
  leaseMs: number;
  maxAttempts: number;
  now: number;
}

/**
 * Claims the oldest runnable job under a lease: a queued job, or a processing job whose lease
 * expired (its worker died) and that has attempts left. One statement, so two workers never
 * claim the same job; PostgreSQL adds SKIP LOCKED so they do not wait on each other either.
 */
export async function claimNext(db: Kysely<Database>, dialect: Dialect, spec: ClaimSpec): Promise<JobRow | undefined> {
  assertTransitions(['queued', 'processing'], 'processing');
  const pick = db
    .selectFrom('jobs')
    .select('uuid')
    .where((eb) =>
      eb.or([
        eb('status', '=', 'queued'),
        eb.and([
          eb('status', '=', 'processing'),
          eb('lease_expires_at', '<', spec.now),
          eb('attempts', '<', spec.maxAttempts),
        ]),
      ]),
    )
    .orderBy('created_at')
    .limit(1)
    .$if(dialect === 'postgres', (q) => q.forUpdate().skipLocked());
  return db
    .updateTable('jobs')
    .set({
      status: 'processing',
      status_detail: 'starting',
      lease_owner: spec.workerId,
      lease_expires_at: spec.now + spec.leaseMs,
      attempts: sql<number>`attempts + 1`,
      started_at: sql<number>`coalesce(started_at, ${spec.now})`,
      updated_at: spec.now,
    })
    .where('uuid', '=', pick)
    .where('status', 'in', ['queued', 'processing'])
    .returningAll()
    .executeTakeFirst();
}

/** Extends a lease; false when the job is no longer ours (cancelled, or lease lost). */
export async function renewLease(
  db: Kysely<Database>,
  uuid: string,
  workerId: string,
  until: number,
  detail?: string,
): Promise<boolean> {
  const res = await db
    .updateTable('jobs')
    .set({ lease_expires_at: until, ...(detail !== undefined ? { status_detail: detail } : {}) })
    .where('uuid', '=', uuid)
    .where('status', '=', 'processing')
    .where('lease_owner', '=', workerId)
    .executeTakeFirst();
  return Number(res.numUpdatedRows) > 0;
}

/** Processing jobs whose lease expired with no attempts left: they are failed by maintenance. */
export async function exhaustedJobs(db: Kysely<Database>, now: number, maxAttempts: number): Promise<string[]> {
  const rows = await db
    .selectFrom('jobs')
    .select('uuid')
    .where('status', '=', 'processing')
    .where('lease_expires_at', '<', now)
    .where('attempts', '>=', maxAttempts)
    .limit(100)
    .execute();
  return rows.map((r) => r.uuid);
}

/** Completed jobs whose result blob is past retention and not yet deleted. */
export function expiredResults(db: Kysely<Database>, finishedBefore: number) {
  return db
    .selectFrom('jobs')
    .select(['uuid', 'result_key'])
    .where('status', '=', 'completed')
    .where('result_key', 'is not', null)
    .where('result_deleted_at', 'is', null)
    .where('finished_at', '<', finishedBefore)
    .limit(500)
    .execute();
}

export async function markResultDeleted(db: Kysely<Database>, uuid: string, now: number): Promise<void> {
  await db.updateTable('jobs').set({ result_deleted_at: now }).where('uuid', '=', uuid).execute();
}

export interface ListSpec {
  owner: string;
  status?: JobStatus;
  jobType?: string;
  limit: number;
  /** Exclusive: jobs strictly older than this (created_at, uuid) pair. */
  before?: { createdAt: number; uuid: string };
}

/** The owner's jobs, newest first, keyset-paginated on (created_at, uuid). */
export function listJobs(db: Kysely<Database>, spec: ListSpec): Promise<JobRow[]> {
  let q = db.selectFrom('jobs').selectAll().where('owner', '=', spec.owner);
  if (spec.status) q = q.where('status', '=', spec.status);
  if (spec.jobType) q = q.where('job_type', '=', spec.jobType);
  if (spec.before) {
    const { createdAt, uuid } = spec.before;
    q = q.where((eb) => eb.or([eb('created_at', '<', createdAt), eb.and([eb('created_at', '=', createdAt), eb('uuid', '<', uuid)])]));
  }
  return q.orderBy('created_at', 'desc').orderBy('uuid', 'desc').limit(spec.limit).execute();
}

/** 1-based place of a queued job among all queued jobs (claims go oldest first). */
export async function queuePosition(db: Kysely<Database>, createdAt: number): Promise<number> {
  const row = await db
    .selectFrom('jobs')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('status', '=', 'queued')
    .where('created_at', '<', createdAt)
    .executeTakeFirstOrThrow();
  return Number(row.n) + 1;
}

/** Jobs per active state, for the queue-depth gauge. */
export async function countActive(db: Kysely<Database>): Promise<Record<'queued' | 'processing', number>> {
  const rows = await db
    .selectFrom('jobs')
    .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
    .where('status', 'in', ['queued', 'processing'])
    .groupBy('status')
    .execute();
  const out = { queued: 0, processing: 0 };
  for (const r of rows) out[r.status as 'queued' | 'processing'] = Number(r.n);
  return out;
}
