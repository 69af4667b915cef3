import SQLite from 'better-sqlite3';
import { PostgresAdapter, sql, type Insertable, type Kysely, type Selectable } from 'kysely';
import { sqliteHandle } from './db.js';
import type { Dialect } from './store.js';
import type { Database, WebhookAttemptsTable, WebhookEventsTable } from './schema.js';
import { runPg, type NamedStatement } from './pg-statements.js';
import { WalCheckpointer } from './wal-checkpointer.js';

/**
 * Every webhook query lives here, the outbox insert included (jobs/lifecycle.ts calls it in the
 * terminal state change's transaction). Times are Unix milliseconds (BIGINT, parsed to numbers on
 * PostgreSQL by store/postgres.ts).
 */

export type WebhookEventRow = Selectable<WebhookEventsTable>;
export type WebhookAttemptRow = Selectable<WebhookAttemptsTable>;

/**
 * The columns a claim returns: what an attempt sends and what recording it needs, no more (each
 * column returned costs every claimed row a value built in JavaScript).
 */
const CLAIMED_COLUMNS = [
  'event_id',
  'job_uuid',
  'event_type',
  'url',
  'destination',
  'secret',
  'body',
  'attempts',
  'endpoint_id',
  // With event_id, where the destination's next claim starts (DestinationClaim.after).
  'next_attempt_at',
] as const;
/** A claimed event; its lease's end is the claim's, the same for every row (set here, not read back). */
export type ClaimedEventRow = Pick<WebhookEventRow, (typeof CLAIMED_COLUMNS)[number]> & { lease_expires_at: number };
/** (destination, cursor's next_attempt_at, cursor's event_id, now, now, limit) */
type PickParams = [string, number, string, number, number, number];
/** CLAIMED_COLUMNS' values, in order (a claim's row as an array). */
type ClaimedValues = [
  string,
  string,
  string,
  string,
  string | null,
  string | null,
  string,
  number,
  string | null,
  number | null,
];
/** SQLite's pick: CLAIMED_COLUMNS' values, then the row's rowid. */
type ClaimedTuple = [...ClaimedValues, number];

/**
 * A claimed row from its array (better-sqlite3 and pg both set an object's columns one by one,
 * dearer than this one literal).
 */
const claimed = (t: ClaimedValues | ClaimedTuple, lease: number): ClaimedEventRow => ({
  event_id: t[0],
  job_uuid: t[1],
  event_type: t[2],
  url: t[3],
  destination: t[4],
  secret: t[5],
  body: t[6],
  attempts: t[7],
  endpoint_id: t[8],
  next_attempt_at: t[9],
  lease_expires_at: lease,
});
const claimedColumns = (t: string) => sql.raw(CLAIMED_COLUMNS.map((c) => `${t}.${c}`).join(', '));

/**
 * The dispatcher's SQLite statements, prepared once per connection and run directly inside one
 * synchronous transaction: the claims and the recording of attempts run for every delivery, and
 * building a statement costs more than running it (anonymous parameters, in order: binding them
 * is cheaper than by name, and better-sqlite3 takes no numbered ones). Only while no Kysely transaction is open on the
 * connection (a direct statement would join it); otherwise the Kysely form runs.
 */
interface DirectStatements {
  /** A destination's claimable rows as arrays, in CLAIMED_COLUMNS' order, then their rowids. */
  pick: SQLite.Statement<PickParams, ClaimedTuple>;
  /** (owner, lease, JSON array of the picked rowids) */
  lease: SQLite.Statement<[string, number, string]>;
  /** (event id, event id, started, duration, http status, error, ok, manual) */
  insertAttempt: SQLite.Statement<[string, string, number, number, number | null, string | null, number, number]>;
  /** (state, next attempt at, now, event id, owner, claimed attempts) */
  moveOn: SQLite.Statement<[string, number | null, number, string, string, number]>;
  /** (now, event id, owner) */
  release: SQLite.Statement<[number, string, string]>;
}
const directStatements = new WeakMap<SQLite.Database, DirectStatements>();

/** The texts of DirectStatements (exported for bench/webhooks-explain.ts, which prints their plans). */
export const SQLITE_DIRECT_SQL: Readonly<Record<keyof DirectStatements, string>> = {
  pick: `SELECT ${CLAIMED_COLUMNS.join(', ')}, rowid FROM webhook_events
    WHERE destination = ? AND state = 'pending' AND (next_attempt_at, event_id) > (?, ?) AND next_attempt_at <= ?
      AND (lease_expires_at IS NULL OR lease_expires_at < ?)
    ORDER BY next_attempt_at, event_id LIMIT ?`,
  // The lease alone changes (no updated_at): the row's indexes stay as they are.
  lease: `UPDATE webhook_events SET lease_owner = ?, lease_expires_at = ?
    WHERE rowid IN (SELECT value FROM json_each(?))`,
  insertAttempt: `INSERT INTO webhook_attempts (event_id, attempt, started_at, duration_ms, http_status, error, ok, manual)
    VALUES (?, (SELECT count(*) + 1 FROM webhook_attempts WHERE event_id = ?), ?, ?, ?, ?, ?, ?)`,
  moveOn: `UPDATE webhook_events SET state = ?, next_attempt_at = ?, attempts = attempts + 1,
      lease_owner = NULL, lease_expires_at = NULL, updated_at = ?
    WHERE event_id = ? AND (state || '') = 'pending' AND lease_owner = ? AND attempts = ?`,
  release: `UPDATE webhook_events SET lease_owner = NULL, lease_expires_at = NULL, updated_at = ?
    WHERE event_id = ? AND lease_owner = ?`,
};

/** A dispatcher's own connection and the thread that checkpoints for it. */
interface DispatchConnection {
  conn: SQLite.Database;
  checkpointer: WalCheckpointer | undefined;
}
/** The dispatcher's own connections (openDispatchConnection), by the store's connection. */
const dispatchConnections = new WeakMap<SQLite.Database, DispatchConnection>();
/** Page cache of the dispatcher's own connection, KiB: SQLite's default (the store's is 64 MiB). */
const DISPATCH_CACHE_KIB = 2_048;

/**
 * Opens the dispatcher's own connection to a SQLite store's file, which its claims and recordings
 * then use; answers the function that closes it (undefined for PostgreSQL or an in-memory store).
 * It has a small page cache of its own: at the commit of a transaction in which an index page split
 * took a page from the freelist (every recording, as delivered events leave the pending indexes),
 * SQLite scans its whole page cache (balance_nonroot renumbers pages through the lock-byte page's
 * number, above the file's size, and the commit truncates the cache to the file's size); with the
 * store's 64 MiB that scan cost ~1 µs per recorded row. It does not checkpoint the WAL itself: a
 * WalCheckpointer's thread does, off the event loop (store/wal-checkpointer.ts). Its other settings
 * are the store's.
 */
export function openDispatchConnection(db: Kysely<Database>): (() => Promise<void>) | undefined {
  const main = sqliteHandle(db);
  if (!main || main.memory || !main.open) return undefined;
  const own = new SQLite(main.name, { fileMustExist: true });
  const synchronous = Number(main.pragma('synchronous', { simple: true }));
  for (const setting of ['synchronous', 'busy_timeout', 'foreign_keys'])
    own.pragma(`${setting} = ${Number(main.pragma(setting, { simple: true }))}`);
  own.pragma(`cache_size = -${DISPATCH_CACHE_KIB}`);
  own.pragma('wal_autocheckpoint = 0');
  const d: DispatchConnection = { conn: own, checkpointer: undefined };
  d.checkpointer = new WalCheckpointer(main.name, synchronous, () => {
    // The thread failed: this connection checkpoints again (SQLite's default threshold).
    d.checkpointer = undefined;
    if (own.open) own.pragma('wal_autocheckpoint = 1000');
  });
  dispatchConnections.set(main, d);
  return async () => {
    if (dispatchConnections.get(main) === d) dispatchConnections.delete(main);
    own.close();
    await d.checkpointer?.close();
  };
}

/** The checkpointer of a store's dispatcher connection, if one is open (tests, benches). */
export function dispatchCheckpointer(db: Kysely<Database>): WalCheckpointer | undefined {
  const main = sqliteHandle(db);
  return main && dispatchConnections.get(main)?.checkpointer;
}

/** The direct path: a connection, its prepared statements, and who checkpoints after its commits. */
interface Direct {
  conn: SQLite.Database;
  st: DirectStatements;
  checkpointer: WalCheckpointer | undefined;
}

/**
 * The prepared statements on the connection the direct path may use now, or undefined while a
 * Kysely transaction is open on the store's connection: a direct statement there would join that
 * transaction, and one on the dispatcher's own connection would wait, holding the thread, for a
 * write lock that transaction holds or will take (and a write committed under it would leave the
 * transaction's snapshot stale). The Kysely form runs instead, after the transaction.
 */
function direct(db: Kysely<Database>): Direct | undefined {
  const main = sqliteHandle(db);
  if (!main || main.inTransaction) return undefined;
  const own = dispatchConnections.get(main);
  const conn = own?.conn ?? main;
  let st = directStatements.get(conn);
  if (!st) {
    const q = SQLITE_DIRECT_SQL;
    st = {
      pick: conn.prepare<PickParams, ClaimedTuple>(q.pick).raw(true),
      lease: conn.prepare(q.lease),
      insertAttempt: conn.prepare(q.insertAttempt),
      moveOn: conn.prepare(q.moveOn),
      release: conn.prepare(q.release),
    };
    directStatements.set(conn, st);
  }
  return { conn, st, checkpointer: own?.checkpointer };
}

/**
 * Due deliveries are found through the partial index `webhook_events_pending_destination`
 * (destination, next_attempt_at) WHERE state = 'pending' (migration 004): delivered and failed
 * events are not in it, so no query here grows with the history, only with what is pending.
 */

/** A destination with pending events and the earliest next_attempt_at among them. */
export interface PendingDestination {
  destination: string;
  /** Earliest next_attempt_at of its pending events (leased ones included). */
  dueAt: number;
}

/**
 * Destinations with pending events, in name order after `after` (a round-robin cursor), at most
 * `limit`: a skip scan of the index, one seek per destination, whatever the number of events.
 */
export async function pendingDestinations(
  db: Kysely<Database>,
  after: string,
  limit: number,
): Promise<PendingDestination[]> {
  const { rows } = await pendingDestinationsQuery(after, limit).execute(db);
  return rows.map((r) => ({ destination: r.destination, dueAt: Number(r.due_at) }));
}

/** The statement of pendingDestinations (exported for bench/webhooks-explain.ts). */
export function pendingDestinationsQuery(after: string, limit: number) {
  return sql<{ destination: string; due_at: number | string }>`
    WITH RECURSIVE d(dest, n) AS (
      SELECT (SELECT min(destination) FROM webhook_events WHERE state = 'pending' AND destination > ${after}), 1
      UNION ALL
      SELECT (SELECT min(destination) FROM webhook_events WHERE state = 'pending' AND destination > d.dest), d.n + 1
      FROM d WHERE d.dest IS NOT NULL AND d.n < ${limit}
    )
    SELECT dest AS destination,
      (SELECT next_attempt_at FROM webhook_events
        WHERE state = 'pending' AND destination = d.dest ORDER BY next_attempt_at LIMIT 1) AS due_at
    FROM d WHERE dest IS NOT NULL`;
}

/** What dueDestinations found. */
export interface DueDestinations {
  /** The destinations of the claimable events read, most overdue first. */
  destinations: string[];
  /** True when fewer than the asked-for rows were claimable: these are all the destinations with claimable events. */
  complete: boolean;
}

/**
 * The destinations of the first `rows` claimable events (due, not leased), most overdue first:
 * a range of `webhook_events_pending_due` (migration 012) from its oldest end, so its cost is at
 * most `rows` plus the leased due events it steps over, whatever the number of destinations
 * with events scheduled later (receivers in back-off). When fewer than `rows` are claimable, the
 * answer is every destination that has one (`complete`); else a backlog fills the range and
 * destinations past it are found by pendingDestinations' pages.
 */
export async function dueDestinations(db: Kysely<Database>, now: number, rows: number): Promise<DueDestinations> {
  const { rows: found } = await dueDestinationsQuery(now, rows).execute(db);
  let read = 0;
  for (const r of found) read += Number(r.n);
  return { destinations: found.map((r) => r.destination), complete: read < rows };
}

/** The statement of dueDestinations (exported for bench/webhooks-explain.ts). */
export function dueDestinationsQuery(now: number, rows: number) {
  return sql<{ destination: string; n: number | string; due_at: number | string }>`
    SELECT destination, count(*) AS n, min(next_attempt_at) AS due_at FROM (
      SELECT destination, next_attempt_at FROM webhook_events
      WHERE state = 'pending' AND next_attempt_at <= ${now}
        AND (lease_expires_at IS NULL OR lease_expires_at < ${now}) AND destination IS NOT NULL
      ORDER BY next_attempt_at LIMIT ${rows}
    ) due
    GROUP BY destination ORDER BY due_at`;
}

export interface DestinationClaim {
  destination: string;
  /** At most this many of its due events. */
  limit: number;
  /**
   * Only events after this one, in claim order (next_attempt_at, then event_id): the last event
   * this dispatcher claimed there, so that the claim does not step over the ones it still holds.
   * Events before it (handed back, or another dispatcher's whose lease expired) are not claimed:
   * the caller leaves it out now and then. SQLite's Kysely form (in a caller's transaction) ignores it.
   */
  after?: ClaimCursor;
}

/** A position in a destination's claim order. */
export interface ClaimCursor {
  at: number;
  eventId: string;
}

/** Where a claim starts without a cursor: before every event (times are positive, ids non-empty). */
const START: ClaimCursor = { at: -1, eventId: '' };

export interface ClaimSpec {
  /** The dispatcher taking the leases. */
  leaseOwner: string;
  leaseMs: number;
  now: number;
  destinations: readonly DestinationClaim[];
}

/**
 * Claims, in one transaction, up to `limit` due events of each destination (most overdue first)
 * under a lease: due (next_attempt_at <= now) and not leased, or leased by a dispatcher whose
 * lease expired (it died mid-attempt). Per-destination limits keep the dispatcher's fairness cap
 * exact, and each destination is an index range, so a destination with a large backlog costs
 * the others nothing. SQLite runs the claim under its write lock (claimDirect; the Kysely form is
 * one statement, for a caller's open transaction); PostgreSQL's one statement locks the picked
 * rows with SKIP LOCKED, so concurrent dispatchers never take the same event nor wait on each other
 * (in a MATERIALIZED CTE: as a join input, the LIMITed subquery could be rescanned per row).
 * A claim writes the lease alone, not updated_at (which webhook_events_failed indexes): on
 * PostgreSQL the row can then be updated in place (a HOT update, no index entries written), and on
 * SQLite no index is touched; updated_at keeps the time of the event's last change of state.
 */
export async function claimDueEvents(
  db: Kysely<Database>,
  dialect: Dialect,
  spec: ClaimSpec,
): Promise<ClaimedEventRow[]> {
  const lease = spec.now + spec.leaseMs;
  if (dialect === 'postgres') return claimPg(db, spec, lease);
  const d = direct(db);
  if (d) return claimDirect(d, spec, lease);
  const query = claimDueEventsQuery(spec);
  const rows = query ? (await query.execute(db)).rows : [];
  for (const r of rows) (r as ClaimedEventRow).lease_expires_at = lease;
  return rows as ClaimedEventRow[];
}

/**
 * SQLite's claim: a read of each destination's claimable rows, then the lease written on exactly
 * those (by rowid), in one IMMEDIATE transaction, so no other writer comes between the two. An
 * UPDATE … RETURNING would copy every returned row (bodies included) into a temporary B-tree
 * before handing back the first: ~1 µs per claimed event more (bench/dispatch-db-costs.ts).
 */
function claimDirect(d: Direct, spec: ClaimSpec, lease: number): ClaimedEventRow[] {
  const { leaseOwner: owner, now } = spec;
  const claimedRows = d.conn
    .transaction(() => {
      const rows: ClaimedEventRow[] = [];
      for (let i = 0; i < spec.destinations.length; i++) {
        const { destination, limit } = spec.destinations[i]!;
        if (limit <= 0) continue;
        const after = spec.destinations[i]!.after ?? START;
        const picked = d.st.pick.all(destination, after.at, after.eventId, now, now, limit);
        if (picked.length === 0) continue;
        // Leased before the next destination's pick, so a destination named twice is not claimed twice.
        d.st.lease.run(owner, lease, JSON.stringify(picked.map((t) => t[10])));
        for (const t of picked) rows.push(claimed(t, lease));
      }
      return rows;
    })
    .immediate();
  d.checkpointer?.committed(claimedRows.length);
  return claimedRows;
}

/**
 * PostgreSQL's claim, one named statement whatever the batch: $1 the destinations (text[]), $2
 * their limits (int[]), $3 now, $4 the lease's owner, $5 its end, $6 and $7 their cursors'
 * next_attempt_at (bigint[]) and event_id (text[]), the index's range starting after them. The rows come back in
 * CLAIMED_COLUMNS' order. The leases are written through the locked rows' ctid (locked, a row
 * keeps it until the statement ends), a TID fetch instead of a primary-key descent per row.
 * Its commit does not wait for the WAL flush (`synchronous_commit` off for this transaction only;
 * in a caller's transaction, for that one): the flush cost more server CPU than the rest of a
 * claim of 64. What a server crash can lose is the last fraction of a second's leases, never an
 * event: the recording of an attempt flushes every earlier commit with its own, and an attempt
 * whose lease was lost is recorded without moving its event, which is sent again when due (a
 * duplicate: deliveries are at least once).
 */
export const PG_CLAIM: NamedStatement = {
  name: 'webhooks_claim_4',
  text: `WITH unflushed AS MATERIALIZED (SELECT set_config('synchronous_commit', 'off', true)),
    picked AS MATERIALIZED (
      SELECT c.tid FROM unflushed, webhook_claim_rooms($1::text[], $2::int[], $6::bigint[], $7::text[]) AS d
      CROSS JOIN LATERAL (
        SELECT w.ctid AS tid FROM webhook_events w
        WHERE w.destination = d.destination AND w.state = 'pending'
          AND (w.next_attempt_at, w.event_id) > (d.after_at, d.after_id) AND w.next_attempt_at <= $3
          AND (w.lease_expires_at IS NULL OR w.lease_expires_at < $3)
        ORDER BY w.next_attempt_at, w.event_id LIMIT d.room
        FOR UPDATE SKIP LOCKED
      ) c
    )
    UPDATE webhook_events e SET lease_owner = $4, lease_expires_at = $5::bigint
    FROM picked
    WHERE e.ctid = picked.tid AND (e.state || '') = 'pending' AND (e.next_attempt_at + 0) <= $3
      AND (e.lease_expires_at IS NULL OR e.lease_expires_at < $3)
    RETURNING ${CLAIMED_COLUMNS.map((c) => `e.${c}`).join(', ')}`,
};

/** PG_CLAIM's parameters for `spec`; undefined when nothing is wanted. */
export function pgClaimParams(spec: ClaimSpec): unknown[] | undefined {
  const wanted = spec.destinations.filter((d) => d.limit > 0);
  if (wanted.length === 0) return undefined;
  return [
    wanted.map((d) => d.destination),
    wanted.map((d) => d.limit),
    spec.now,
    spec.leaseOwner,
    spec.now + spec.leaseMs,
    wanted.map((d) => (d.after ?? START).at),
    wanted.map((d) => (d.after ?? START).eventId),
  ];
}

async function claimPg(db: Kysely<Database>, spec: ClaimSpec, lease: number): Promise<ClaimedEventRow[]> {
  const params = pgClaimParams(spec);
  if (!params) return [];
  const rows = await runPg<ClaimedValues>(db, PG_CLAIM, params);
  return rows.map((t) => claimed(t, lease));
}

/**
 * SQLite's claim in one statement, for a caller's open Kysely transaction (exported for
 * bench/webhooks-explain.ts); undefined when nothing is wanted.
 */
export function claimDueEventsQuery(spec: ClaimSpec) {
  const wanted = spec.destinations.filter((d) => d.limit > 0);
  if (wanted.length === 0) return undefined;
  const { now } = spec;
  const lease = now + spec.leaseMs;
  const claimable = (t: string) =>
    sql`${sql.ref(`${t}.state`)} = 'pending' AND ${sql.ref(`${t}.next_attempt_at`)} <= ${now} AND (${sql.ref(`${t}.lease_expires_at`)} IS NULL OR ${sql.ref(`${t}.lease_expires_at`)} < ${now})`;
  // The same test on the row being updated, written so that no planner drives the UPDATE from the
  // state index instead of the picked ids (SQLite without statistics does: a scan of every due event).
  const stillClaimable = (t: string) =>
    sql`(${sql.ref(`${t}.state`)} || '') = 'pending' AND (${sql.ref(`${t}.next_attempt_at`)} + 0) <= ${now} AND (${sql.ref(`${t}.lease_expires_at`)} IS NULL OR ${sql.ref(`${t}.lease_expires_at`)} < ${now})`;
  const picks = wanted.map(
    (d) => sql`SELECT event_id FROM (
      SELECT w.event_id FROM webhook_events w WHERE w.destination = ${d.destination} AND ${claimable('w')}
      ORDER BY w.next_attempt_at LIMIT ${d.limit})`,
  );
  return sql<Omit<ClaimedEventRow, 'lease_expires_at'>>`
    UPDATE webhook_events SET lease_owner = ${spec.leaseOwner}, lease_expires_at = ${lease}
    WHERE event_id IN (${sql.join(picks, sql` UNION ALL `)}) AND ${stillClaimable('webhook_events')}
    RETURNING ${claimedColumns('webhook_events')}`;
}

/** When the next pending event falls due after `now` (for the dispatcher's sleep), if any: one index seek. */
export async function nextDueAt(db: Kysely<Database>, now: number): Promise<number | undefined> {
  const row = await db
    .selectFrom('webhook_events')
    .select('next_attempt_at')
    .where('state', '=', sql.lit('pending'))
    .where('next_attempt_at', '>', now)
    .orderBy('next_attempt_at')
    .limit(1)
    .executeTakeFirst();
  return row?.next_attempt_at ?? undefined;
}

export interface AttemptRecord {
  startedAt: number;
  durationMs: number;
  httpStatus: number | null;
  error: string | null;
  ok: boolean;
  /** A redelivery by hand; absent for the dispatcher's scheduled attempts (its results as they come). */
  manual?: boolean;
}

/**
 * Appends attempts in one statement; each one's number is one more than its event's attempts
 * recorded so far (events must be distinct within one call).
 */
async function insertAttempts(
  db: Kysely<Database>,
  rows: ReadonlyArray<{ eventId: string; attempt: AttemptRecord }>,
): Promise<void> {
  if (rows.length === 0) return;
  await db
    .insertInto('webhook_attempts')
    .values(
      rows.map(({ eventId, attempt: a }) => ({
        event_id: eventId,
        attempt: sql<number>`(SELECT count(*) + 1 FROM webhook_attempts WHERE event_id = ${eventId})`,
        started_at: a.startedAt,
        duration_ms: Math.max(0, Math.round(a.durationMs)),
        http_status: a.httpStatus,
        error: a.error,
        ok: a.ok ? 1 : 0,
        manual: a.manual ? 1 : 0,
      })),
    )
    .execute();
}

async function insertAttempt(db: Kysely<Database>, eventId: string, a: AttemptRecord): Promise<void> {
  await insertAttempts(db, [{ eventId, attempt: a }]);
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

export interface ScheduledAttempt extends Omit<ScheduledOutcome, 'leaseOwner'> {
  eventId: string;
}

/**
 * At most this many outcomes per recording transaction. SQLite's runs synchronously on the event
 * loop (~2.5 ms for 500), so it stays short; it writes every page it changed to the WAL (the events'
 * pages, and per transaction the attempts' last pages, the indexes' and the header's): 500 rather
 * than 200 measured 0–0.3 µs per row less (bench/dispatch-db-costs.ts RECORD=). PostgreSQL's is one statement
 * whatever its size (the batch travels as JSON), and each commit waits for a WAL flush: large batches
 * keep up with fast receivers.
 */
export const MAX_RECORD_BATCH: Readonly<Record<Dialect, number>> = { sqlite: 500, postgres: 1_000 };

/**
 * Records finished scheduled attempts of one dispatcher and moves their events on, and gives
 * back the events in `release` (claimed, never sent), all in one transaction. An event changes
 * only if this dispatcher still holds its lease and it is still pending (a manual redelivery may
 * have delivered it meanwhile); its attempt is recorded either way, because it happened. Returns
 * the ids of the events that moved. Events must be distinct; at most MAX_RECORD_BATCH of them
 * (the SQLite fallback binds 10 parameters per attempt).
 * The common case (no `within`) is one synchronous transaction of prepared statements on SQLite,
 * and one statement (no BEGIN, no COMMIT) on PostgreSQL.
 */
export async function recordScheduledAttempts(
  db: Kysely<Database>,
  dialect: Dialect,
  leaseOwner: string,
  attempts: readonly ScheduledAttempt[],
  release: readonly string[],
  now: number,
  /** More writes of the same transaction (an endpoint's failure record). */
  within?: (trx: Kysely<Database>) => Promise<void>,
): Promise<Set<string>> {
  if (attempts.length === 0 && release.length === 0) return new Set();
  const d = dialect === 'sqlite' && !within ? direct(db) : undefined;
  if (d) return recordDirect(d, leaseOwner, attempts, release, now);
  if (dialect === 'postgres' && !within && release.length === 0) return recordPg(db, leaseOwner, attempts, now);
  return db.transaction().execute(async (trx) => {
    let applied = new Set<string>();
    if (attempts.length > 0)
      applied =
        dialect === 'postgres'
          ? await recordPg(trx, leaseOwner, attempts, now)
          : await recordKysely(trx, leaseOwner, attempts, now);
    if (release.length > 0) await releaseEvents(trx, release, leaseOwner, now);
    await within?.(trx);
    return applied;
  });
}

const movedIds = (r: { rows: Array<{ event_id: string }> }) => new Set(r.rows.map((x) => x.event_id));

function recordDirect(
  d: Direct,
  owner: string,
  attempts: readonly ScheduledAttempt[],
  release: readonly string[],
  now: number,
): Set<string> {
  const moved = d.conn
    .transaction(() => {
      const applied = new Set<string>();
      for (const o of attempts) {
        const a = o.attempt;
        const id = o.eventId;
        const duration = Math.max(0, Math.round(a.durationMs));
        d.st.insertAttempt.run(id, id, a.startedAt, duration, a.httpStatus, a.error, a.ok ? 1 : 0, a.manual ? 1 : 0);
        if (d.st.moveOn.run(o.state, o.nextAttemptAt, now, id, owner, o.claimedAttempts).changes > 0) applied.add(id);
      }
      for (const id of release) d.st.release.run(now, id, owner);
      return applied;
    })
    .immediate();
  d.checkpointer?.committed(attempts.length + release.length);
  return moved;
}

/**
 * PostgreSQL: the attempts' rows and their events' moves in one named statement, the batch passed
 * as one JSON parameter ($1; JSON.stringify is native, where ten array parameters are serialised
 * value by value in JavaScript; null and false fields left out), then $2 now and $3 the lease's
 * owner. Returns the moved events' ids. An attempt's number is one more than its event's attempt
 * rows: `attempts_logged` (migration 015), updated with the move; counted when it is NULL, and for
 * an event that does not move (its lease lost: its count is then set back to NULL, since this
 * statement adds a row it does not count). `= ANY(ids)` (an array computed once) keeps the
 * lookups on the primary key whatever the planner's statistics; the rows go in in the batch's
 * order (the delivery log lists attempts by id). The state test is written so that it matches no
 * partial index: without statistics the planner ANDs the primary key's lookups with a whole
 * pending index (every pending event read per batch).
 */
export const PG_RECORD: NamedStatement = {
  name: 'webhooks_record_2',
  text: `WITH v AS MATERIALIZED (
      SELECT * FROM ROWS FROM (json_to_recordset($1::json) AS (id text, st text, nx bigint, att int,
        started bigint, dur int, http int, err text, ok int, manual int)) WITH ORDINALITY
        AS v(id, st, nx, att, started, dur, http, err, ok, manual, ord)
    ), moved AS (
      UPDATE webhook_events e SET state = v.st, next_attempt_at = v.nx, attempts = e.attempts + 1,
        lease_owner = NULL, lease_expires_at = NULL, updated_at = $2::bigint,
        attempts_logged = coalesce(e.attempts_logged,
          (SELECT count(*) FROM webhook_attempts a WHERE a.event_id = e.event_id)) + 1
      FROM v
      WHERE e.event_id = ANY(ARRAY(SELECT id FROM v)) AND e.event_id = v.id AND (e.state || '') = 'pending'
        AND e.lease_owner = $3 AND e.attempts = v.att
      RETURNING e.event_id, e.attempts_logged
    ), logged AS (
      INSERT INTO webhook_attempts (event_id, attempt, started_at, duration_ms, http_status, error, ok, manual)
      SELECT v.id, coalesce(m.attempts_logged, (SELECT count(*) + 1 FROM webhook_attempts a WHERE a.event_id = v.id)),
        v.started, v.dur, v.http, v.err, v.ok, coalesce(v.manual, 0)
      FROM v LEFT JOIN moved m ON m.event_id = v.id
      ORDER BY v.ord
    ), unmoved AS (
      UPDATE webhook_events e SET attempts_logged = NULL
      WHERE e.event_id = ANY(ARRAY(SELECT id FROM v EXCEPT SELECT event_id FROM moved))
        AND e.attempts_logged IS NOT NULL
    )
    SELECT event_id FROM moved`,
};

/** PG_RECORD's parameters (exported for bench/webhooks-explain.ts, which prints its plan). */
export function pgRecordParams(leaseOwner: string, attempts: readonly ScheduledAttempt[], now: number): unknown[] {
  const rows = JSON.stringify(
    attempts.map((o) => ({
      id: o.eventId,
      st: o.state,
      nx: o.nextAttemptAt ?? undefined,
      att: o.claimedAttempts,
      started: o.attempt.startedAt,
      dur: Math.max(0, Math.round(o.attempt.durationMs)),
      http: o.attempt.httpStatus ?? undefined,
      err: o.attempt.error ?? undefined,
      ok: o.attempt.ok ? 1 : 0,
      manual: o.attempt.manual ? 1 : undefined,
    })),
  );
  return [rows, now, leaseOwner];
}

async function recordPg(
  db: Kysely<Database>,
  leaseOwner: string,
  attempts: readonly ScheduledAttempt[],
  now: number,
): Promise<Set<string>> {
  const rows = await runPg<[string]>(db, PG_RECORD, pgRecordParams(leaseOwner, attempts, now));
  return new Set(rows.map((r) => r[0]));
}

/** SQLite inside a Kysely transaction (an endpoint's failure record is written beside). */
async function recordKysely(
  trx: Kysely<Database>,
  leaseOwner: string,
  attempts: readonly ScheduledAttempt[],
  now: number,
): Promise<Set<string>> {
  await insertAttempts(
    trx,
    attempts.map((o) => ({ eventId: o.eventId, attempt: o.attempt })),
  );
  // Correlated lookups rather than UPDATE … FROM: SQLite plans a join with a VALUES list as a
  // scan of the whole table; this form is primary-key seeks.
  const values = attempts.map((o) => sql`(${o.eventId}, ${o.state}, ${o.nextAttemptAt}, ${o.claimedAttempts})`);
  const { rows } = await sql<{ event_id: string }>`
    WITH v(id, st, nx, att) AS (VALUES ${sql.join(values)})
    UPDATE webhook_events SET
      state = (SELECT st FROM v WHERE v.id = webhook_events.event_id),
      next_attempt_at = (SELECT nx FROM v WHERE v.id = webhook_events.event_id),
      attempts = attempts + 1, lease_owner = NULL, lease_expires_at = NULL, updated_at = ${now}
    WHERE event_id IN (SELECT id FROM v) AND (state || '') = 'pending' AND lease_owner = ${leaseOwner}
      AND attempts = (SELECT att FROM v WHERE v.id = webhook_events.event_id)
    RETURNING event_id`.execute(trx);
  return movedIds({ rows });
}

/** Gives claimed events back untouched (never sent): due again at once. */
async function releaseEvents(
  db: Kysely<Database>,
  eventIds: readonly string[],
  leaseOwner: string,
  now: number,
): Promise<void> {
  if (eventIds.length === 0) return;
  await db
    .updateTable('webhook_events')
    .set({ lease_owner: null, lease_expires_at: null, updated_at: now })
    .where('event_id', 'in', eventIds)
    .where('lease_owner', '=', leaseOwner)
    .execute();
}

/**
 * Records a manual (redeliver) attempt. A success delivers a pending or failed event (any 2xx
 * ends the delivery); a failure changes nothing, so a pending schedule carries on as it was.
 */
export async function finishManualAttempt(
  db: Kysely<Database>,
  eventId: string,
  attempt: AttemptRecord,
  now: number,
): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await insertAttempt(trx, eventId, { ...attempt, manual: true });
    // PostgreSQL's count of the event's attempts (see PG_RECORD) does not include this one now.
    if (isPostgres(trx))
      await sql`UPDATE webhook_events SET attempts_logged = NULL WHERE event_id = ${eventId}`.execute(trx);
    if (!attempt.ok) return;
    await trx
      .updateTable('webhook_events')
      .set({ state: 'delivered', next_attempt_at: null, updated_at: now })
      .where('event_id', '=', eventId)
      .where('state', 'in', ['pending', 'failed'])
      .execute();
  });
}

const isPostgres = (db: Kysely<Database>) => db.getExecutor().adapter instanceof PostgresAdapter;

/** One event of `owner`'s job (its own webhook's); another owner's is indistinguishable from a missing one. */
export function getEvent(
  db: Kysely<Database>,
  jobUuid: string,
  eventId: string,
  owner: string,
): Promise<WebhookEventRow | undefined> {
  return db
    .selectFrom('webhook_events')
    .selectAll()
    .where('event_id', '=', eventId)
    .where('job_uuid', '=', jobUuid)
    .where('owner', '=', owner)
    .where('endpoint_id', 'is', null)
    .executeTakeFirst();
}

/** A job's events (oldest first) with their attempts (in the order they were recorded). */
export async function listEventsWithAttempts(
  db: Kysely<Database>,
  jobUuid: string,
  owner: string,
): Promise<Array<{ event: WebhookEventRow; attempts: WebhookAttemptRow[] }>> {
  // One snapshot for both reads (an attempt and its event's move are committed together): read
  // apart, a delivery could show as delivered without its last attempt, or the reverse.
  return db
    .transaction()
    .setIsolationLevel('repeatable read')
    .execute((trx) => readEventsWithAttempts(trx, jobUuid, owner));
}

async function readEventsWithAttempts(
  db: Kysely<Database>,
  jobUuid: string,
  owner: string,
): Promise<Array<{ event: WebhookEventRow; attempts: WebhookAttemptRow[] }>> {
  const attempts = await db
    .selectFrom('webhook_attempts')
    .selectAll()
    .where('event_id', 'in', (eb) =>
      eb.selectFrom('webhook_events').select('event_id').where('job_uuid', '=', jobUuid).where('owner', '=', owner),
    )
    .orderBy('id')
    .execute();
  const events = await db
    .selectFrom('webhook_events')
    .selectAll()
    .where('job_uuid', '=', jobUuid)
    .where('owner', '=', owner)
    // The job's own webhook; owner endpoints' deliveries are in their endpoint's log.
    .where('endpoint_id', 'is', null)
    .orderBy('created_at')
    .orderBy('event_id')
    .execute();
  return events.map((event) => ({ event, attempts: attempts.filter((a) => a.event_id === event.event_id) }));
}

export type NewWebhookEvent = Insertable<WebhookEventsTable>;

/** Outbox rows, written in the transaction of the terminal state they announce. */
export async function insertWebhookEvents(db: Kysely<Database>, events: readonly NewWebhookEvent[]): Promise<void> {
  if (events.length > 0)
    await db
      .insertInto('webhook_events')
      .values([...events])
      .execute();
}
