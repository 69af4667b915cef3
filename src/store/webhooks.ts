import { sql, type Kysely, type Selectable } from 'kysely';
import type { Dialect } from './db.js';
import type { Database, WebhookAttemptsTable, WebhookEventsTable } from './schema.js';

/**
 * Every webhook query lives here (the outbox rows themselves are written by transition() in
 * jobs.ts, in the terminal state change's transaction). Times are Unix milliseconds; BIGINT
 * columns come back as strings on PostgreSQL, so callers read them through Number().
 */

export type WebhookEventRow = Selectable<WebhookEventsTable>;
export type WebhookAttemptRow = Selectable<WebhookAttemptsTable>;

export interface ClaimEventSpec {
  /** The dispatcher taking the lease. */
  leaseOwner: string;
  leaseMs: number;
  now: number;
  /** Destinations (origins) this dispatcher will not take more of right now (fairness). */
  skipDestinations?: readonly string[];
}

/**
 * Claims the most overdue pending event under a lease: due (next_attempt_at <= now) and not
 * leased, or leased by a dispatcher whose lease expired (it died mid-attempt). One conditional
 * UPDATE, so two dispatchers never take the same attempt; PostgreSQL adds SKIP LOCKED so they
 * do not wait on each other either.
 */
export async function claimDueEvent(db: Kysely<Database>, dialect: Dialect, spec: ClaimEventSpec): Promise<WebhookEventRow | undefined> {
  const { now } = spec;
  const skip = spec.skipDestinations ?? [];
  const pick = db
    .selectFrom('webhook_events')
    .select('event_id')
    .where('state', '=', 'pending')
    .where('next_attempt_at', '<=', now)
    .where((eb) => eb.or([eb('lease_expires_at', 'is', null), eb('lease_expires_at', '<', now)]))
    .$if(skip.length > 0, (q) => q.where((eb) => eb.or([eb('destination', 'is', null), eb('destination', 'not in', skip)])))
    .orderBy('next_attempt_at')
    .limit(1)
    .$if(dialect === 'postgres', (q) => q.forUpdate().skipLocked());
  return db
    .updateTable('webhook_events')
    .set({ lease_owner: spec.leaseOwner, lease_expires_at: now + spec.leaseMs, updated_at: now })
    .where('event_id', '=', pick)
    .where('state', '=', 'pending')
    .where('next_attempt_at', '<=', now)
    .where((eb) => eb.or([eb('lease_expires_at', 'is', null), eb('lease_expires_at', '<', now)]))
    .returningAll()
    .executeTakeFirst();
}

/** When the next pending event falls due after `now` (for the dispatcher's sleep), if any. */
export async function nextDueAt(db: Kysely<Database>, now: number): Promise<number | undefined> {
  const row = await db
    .selectFrom('webhook_events')
    .select((eb) => eb.fn.min('next_attempt_at').as('at'))
    .where('state', '=', 'pending')
    .where('next_attempt_at', '>', now)
    .executeTakeFirst();
  return row?.at === null || row?.at === undefined ? undefined : Number(row.at);
}

export interface AttemptRecord {
  startedAt: number;
  durationMs: number;
  httpStatus: number | null;
  error: string | null;
  ok: boolean;
  manual: boolean;
}

/** Appends an attempt; its number is one more than the event's attempts so far (one statement). */
async function insertAttempt(db: Kysely<Database>, eventId: string, a: AttemptRecord): Promise<void> {
  await db
    .insertInto('webhook_attempts')
    .values((eb) => ({
      event_id: eventId,
      attempt: eb
        .selectFrom('webhook_attempts')
        .select(sql<number>`count(*) + 1`.as('n'))
        .where('event_id', '=', eventId),
      started_at: a.startedAt,
      duration_ms: Math.max(0, Math.round(a.durationMs)),
      http_status: a.httpStatus,
      error: a.error,
      ok: a.ok ? 1 : 0,
      manual: a.manual ? 1 : 0,
    }))
    .execute();
}

export interface ScheduledOutcome {
  leaseOwner: string;
  /** The event's `attempts` when it was claimed (guards against a stale lease). */
  claimedAttempts: number;
  attempt: AttemptRecord;
  /** 'delivered', 'failed' (schedule exhausted) or 'pending' with the next due time. */
  state: WebhookEventsTable['state'];
  nextAttemptAt: number | null;
  now: number;
}

/**
 * Records a scheduled attempt and moves the event on, in one transaction. The event changes only
 * if this dispatcher still holds its lease and it is still pending (a manual redelivery may have
 * delivered it meanwhile); the attempt is recorded either way, because it happened.
 */
export async function finishScheduledAttempt(db: Kysely<Database>, eventId: string, o: ScheduledOutcome): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    await insertAttempt(trx, eventId, o.attempt);
    const res = await trx
      .updateTable('webhook_events')
      .set({
        state: o.state,
        attempts: sql<number>`attempts + 1`,
        next_attempt_at: o.nextAttemptAt,
        lease_owner: null,
        lease_expires_at: null,
        updated_at: o.now,
      })
      .where('event_id', '=', eventId)
      .where('state', '=', 'pending')
      .where('lease_owner', '=', o.leaseOwner)
      .where('attempts', '=', o.claimedAttempts)
      .executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  });
}

/** Gives a claimed event back untouched (shutdown mid-attempt): due again at once. */
export async function releaseEvent(db: Kysely<Database>, eventId: string, leaseOwner: string, now: number): Promise<void> {
  await db
    .updateTable('webhook_events')
    .set({ lease_owner: null, lease_expires_at: null, updated_at: now })
    .where('event_id', '=', eventId)
    .where('lease_owner', '=', leaseOwner)
    .execute();
}

/**
 * Records a manual (redeliver) attempt. A success delivers a pending or failed event (any 2xx
 * ends the delivery); a failure changes nothing, so a pending schedule carries on as it was.
 */
export async function finishManualAttempt(db: Kysely<Database>, eventId: string, attempt: AttemptRecord, now: number): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await insertAttempt(trx, eventId, { ...attempt, manual: true });
    if (!attempt.ok) return;
    await trx
      .updateTable('webhook_events')
      .set({ state: 'delivered', next_attempt_at: null, updated_at: now })
      .where('event_id', '=', eventId)
      .where('state', 'in', ['pending', 'failed'])
      .execute();
  });
}

/** One event of `owner`'s job; another owner's is indistinguishable from a missing one. */
export function getEvent(db: Kysely<Database>, jobUuid: string, eventId: string, owner: string): Promise<WebhookEventRow | undefined> {
  return db
    .selectFrom('webhook_events')
    .selectAll()
    .where('event_id', '=', eventId)
    .where('job_uuid', '=', jobUuid)
    .where('owner', '=', owner)
    .executeTakeFirst();
}

/** A job's events (oldest first) with their attempts (in the order they were recorded). */
export async function listEventsWithAttempts(
  db: Kysely<Database>,
  jobUuid: string,
  owner: string,
): Promise<Array<{ event: WebhookEventRow; attempts: WebhookAttemptRow[] }>> {
  const events = await db
    .selectFrom('webhook_events')
    .selectAll()
    .where('job_uuid', '=', jobUuid)
    .where('owner', '=', owner)
    .orderBy('created_at')
    .orderBy('event_id')
    .execute();
  if (events.length === 0) return [];
  const attempts = await db
    .selectFrom('webhook_attempts')
    .selectAll()
    .where(
      'event_id',
      'in',
      events.map((e) => e.event_id),
    )
    .orderBy('id')
    .execute();
  return events.map((event) => ({ event, attempts: attempts.filter((a) => a.event_id === event.event_id) }));
}
