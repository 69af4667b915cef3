import {
  CompiledQuery,
  sql,
  type Insertable,
  type Kysely,
  type RawBuilder,
  type Selectable,
  type Updateable,
} from 'kysely';
import type SQLite from 'better-sqlite3';
import { sqliteHandle } from './db.js';
import type { Dialect } from './store.js';
import { ACTIVE_STATUSES, type JobStatus } from '../contract/api.js';
import type { Database, JobsTable } from './schema.js';

/**
 * Every job query lives here; callers never write SQL for jobs. Each query's cost is bounded by
 * what it returns, never by the number of jobs in the table: claims, the owner's last vtime and
 * queue position seek partial indexes that hold only queued rows (migration 003), and the queue
 * depth is read from trigger-maintained counters.
 */

export type JobRow = Selectable<JobsTable>;
/** A new job; its vtime and rank are computed by insertJob. */
export type NewJob = Omit<Insertable<JobsTable>, 'vtime' | 'rank'>;

/**
 * A status as an SQL literal: the hot statements' partial indexes (`WHERE status = 'queued'`) are
 * chosen only when the planner sees the literal, not a parameter.
 */
const statusLit = (s: JobStatus) => sql.lit(s);
const QUEUED = statusLit('queued');
/** `status IN ('queued', 'processing')`: the partial indexes of active jobs say it so. */
const ACTIVE = sql.join(ACTIVE_STATUSES.map(statusLit));

/** An owner's own order: created_at moved `priority` seconds earlier. */
const rankOf = (row: NewJob) => row.created_at - (row.priority ?? 0) * 1000;

/** The columns the public job object needs (status is the hottest read: no input, no webhook). */
const VIEW_COLUMNS = [
  'uuid',
  'owner',
  'job_type',
  'model',
  'status',
  'status_detail',
  'error_type',
  'error_message',
  'result_key',
  'result_content_type',
  'result_size',
  'result_deleted_at',
  'vtime',
  'created_at',
  'started_at',
  'finished_at',
  'deadline',
  'priority',
  'progress',
  'data_removed_at',
  'retention_ms',
  'purge_at',
] as const;
export type JobView = Pick<JobRow, (typeof VIEW_COLUMNS)[number]>;

/**
 * Inserts a queued job with its virtual start time: max(head of the queue, the owner's last
 * queued vtime + 1). Two index seeks inside the INSERT; two concurrent submits of one owner may
 * share a vtime, which only ties them (broken by created_at, uuid). The statement is built and
 * compiled once per dialect and shape of row (building it cost more than running it); each submit
 * only binds its values.
 */
export async function insertJob(db: Kysely<Database>, row: NewJob, notify?: RawBuilder<unknown>): Promise<void> {
  const extra = notify?.compile(db);
  const columns = Object.keys(row);
  const shape = `${columns.join(',')}|${extra?.sql ?? ''}`;
  const adapter = db.getExecutor().adapter;
  let texts = insertTexts.get(adapter);
  if (!texts) insertTexts.set(adapter, (texts = new Map<string, string | null>()));
  let text = texts.get(shape);
  if (text === undefined) {
    // Compiled from placeholders, and kept only when its parameters are exactly the values in
    // order (so binding them is the same statement the builder would make), else built per call.
    const marks = columns.map((_, i) => `\u0000${i}`);
    const probe = Object.fromEntries(columns.map((c, i) => [c, marks[i]])) as unknown as NewJob;
    const compiled = insertStatement(db, probe, '\u0000owner', '\u0000rank', notify).compile();
    const expected = [...marks, '\u0000rank', '\u0000owner', ...(extra?.parameters ?? [])];
    const same =
      compiled.parameters.length === expected.length && compiled.parameters.every((p, i) => p === expected[i]);
    text = same ? compiled.sql : null;
    texts.set(shape, text);
  }
  if (text === null) {
    await insertStatement(db, row, row.owner, rankOf(row), notify).execute();
    return;
  }
  const params = [...Object.values(row), rankOf(row), row.owner, ...(extra?.parameters ?? [])];
  await db.executeQuery(CompiledQuery.raw(text, params));
}

/** Compiled INSERT statements by dialect adapter (shared by a Kysely instance and its transactions). */
const insertTexts = new WeakMap<object, Map<string, string | null>>();

function insertStatement(
  db: Kysely<Database>,
  row: NewJob,
  owner: string,
  rank: number | string,
  notify: RawBuilder<unknown> | undefined,
) {
  const vtime = sql<number>`(SELECT max(v) FROM (
      SELECT coalesce((SELECT vtime FROM jobs WHERE status = ${QUEUED} ORDER BY vtime, created_at, uuid LIMIT 1), 0) AS v
      UNION ALL
      SELECT coalesce((SELECT vtime FROM jobs WHERE status = ${QUEUED} AND owner = ${owner} ORDER BY vtime DESC LIMIT 1) + 1, 0)
    ) AS candidates)`;
  // rank before vtime: the parameters then come in the order insertJob binds them.
  const values = { ...row, rank: rank as number, vtime };
  if (notify === undefined) return db.insertInto('jobs').values(values);
  // PostgreSQL: the NOTIFY rides in the same statement (a data-modifying CTE), one round trip and
  // no BEGIN/COMMIT of its own; it is delivered at commit, so never for a job that was not stored.
  return db
    .with('inserted', (q) => q.insertInto('jobs').values(values).returning('uuid'))
    .selectFrom('inserted')
    .select(notify.as('notified'));
}

/**
 * Inserts many queued jobs (a batch) in multi-row statements. Each owner's jobs take consecutive
 * virtual start times from max(head of the queue, owner's last queued vtime + 1), as that many
 * single submits would: two index seeks per owner, then one INSERT per 500 rows.
 */
export async function insertJobs(db: Kysely<Database>, rows: readonly NewJob[]): Promise<void> {
  if (rows.length === 0) return;
  const head = await db
    .selectFrom('jobs')
    .select('vtime')
    .where(sql<boolean>`status = ${QUEUED}`)
    .orderBy('vtime')
    .orderBy('created_at')
    .orderBy('uuid')
    .limit(1)
    .executeTakeFirst();
  const next = new Map<string, number>();
  for (const owner of new Set(rows.map((r) => r.owner))) {
    const last = await db
      .selectFrom('jobs')
      .select('vtime')
      .where(sql<boolean>`status = ${QUEUED}`)
      .where('owner', '=', owner)
      .orderBy('vtime', 'desc')
      .limit(1)
      .executeTakeFirst();
    next.set(owner, Math.max(head?.vtime ?? 0, last ? last.vtime + 1 : 0));
  }
  const values = rows.map((row) => {
    const vtime = next.get(row.owner)!;
    next.set(row.owner, vtime + 1);
    return { ...row, vtime, rank: rankOf(row) };
  });
  for (let i = 0; i < values.length; i += 500) {
    await db
      .insertInto('jobs')
      .values(values.slice(i, i + 500))
      .execute();
  }
}

/** A job of `owner`; another owner's job is indistinguishable from a missing one. */
export function getJob(db: Kysely<Database>, uuid: string, owner?: string): Promise<JobRow | undefined> {
  let q = db.selectFrom('jobs').selectAll().where('uuid', '=', uuid);
  if (owner !== undefined) q = q.where('owner', '=', owner);
  return q.executeTakeFirst();
}

/** Compiled once per Kysely instance: the status read is the hottest query, and building it costs more than running it. */
const viewQuery = new WeakMap<Kysely<Database>, string>();

function viewQueryOf(db: Kysely<Database>): string {
  let text = viewQuery.get(db);
  if (text === undefined) {
    text = db.selectFrom('jobs').select(VIEW_COLUMNS).where('uuid', '=', '').where('owner', '=', '').compile().sql;
    viewQuery.set(db, text);
  }
  return text;
}

/** A VIEW_COLUMNS row as its values, in that order. */
type ViewValues = { [I in keyof typeof VIEW_COLUMNS]: JobView[(typeof VIEW_COLUMNS)[I] & keyof JobView] };

/**
 * The row object of a status read, built from its values in one literal: better-sqlite3 builds a
 * keyed row one property at a time through V8's API, which costs more than the read itself.
 */
const viewOf = (v: ViewValues): JobView => ({
  uuid: v[0],
  owner: v[1],
  job_type: v[2],
  model: v[3],
  status: v[4],
  status_detail: v[5],
  error_type: v[6],
  error_message: v[7],
  result_key: v[8],
  result_content_type: v[9],
  result_size: v[10],
  result_deleted_at: v[11],
  vtime: v[12],
  created_at: v[13],
  started_at: v[14],
  finished_at: v[15],
  deadline: v[16],
  priority: v[17],
  progress: v[18],
  data_removed_at: v[19],
  retention_ms: v[20],
  purge_at: v[21],
});
// The literal above must take each column from its own place: given the names as values, it gives them back.
const selfCheck = Object.entries(viewOf(VIEW_COLUMNS as unknown as ViewValues));
if (selfCheck.length !== VIEW_COLUMNS.length || selfCheck.some(([name, value]) => name !== value))
  throw new Error('viewOf does not follow VIEW_COLUMNS');

type ViewReader = (uuid: string, owner: string) => JobView | undefined;

/** On SQLite, prepared once on the connection (rows as arrays) and run directly (no Kysely round through promises). */
const viewReaders = new WeakMap<SQLite.Database, ViewReader>();

/**
 * The status read on the SQLite connection behind `db`, without a promise (undefined for
 * PostgreSQL). It reads what the connection sees: the caller makes sure no transaction of the
 * store is open on it (it would see that transaction's uncommitted rows).
 */
export function jobViewReader(db: Kysely<Database>): ViewReader | undefined {
  const direct = sqliteHandle(db);
  if (!direct) return undefined;
  let reader = viewReaders.get(direct);
  if (!reader) {
    const stmt = direct.prepare<[string, string], ViewValues>(viewQueryOf(db)).raw(true);
    reader = (uuid, owner) => {
      const values = stmt.get(uuid, owner);
      return values && viewOf(values);
    };
    viewReaders.set(direct, reader);
  }
  return reader;
}

/**
 * The status read without a promise, where the store can give it: SQLite outside a transaction
 * (inside one, the read would see that transaction's uncommitted rows). Otherwise `null`: use getJobView.
 */
export function getJobViewNow(db: Kysely<Database>, uuid: string, owner: string): JobView | undefined | null {
  const direct = sqliteHandle(db);
  if (!direct || direct.inTransaction) return null;
  return jobViewReader(db)!(uuid, owner);
}

/** The columns a status read needs, by primary key. */
export async function getJobView(db: Kysely<Database>, uuid: string, owner: string): Promise<JobView | undefined> {
  const now = getJobViewNow(db, uuid, owner);
  if (now !== null) return now;
  const res = await db.executeQuery<JobView>(CompiledQuery.raw(viewQueryOf(db), [uuid, owner]));
  return res.rows[0];
}

/** `count`: a move starts an attempt (attempts + 1); `uncount`: the attempt it ends does not count. */
export type AttemptsRule = 'count' | 'uncount';

/** A move between statuses, as jobs/moves.ts describes it (the store only writes what it is given). */
export interface StatusMove {
  from: readonly JobStatus[];
  to: JobStatus;
  /** The status_detail a claim shows. */
  detail?: string | ((...args: never[]) => string | undefined);
  attempts?: AttemptsRule;
}

/** The attempts rule as an SQL expression (undefined: attempts stay). */
const attemptsSet = (rule: AttemptsRule | undefined) =>
  rule === 'count'
    ? sql<number>`attempts + 1`
    : rule === 'uncount'
      ? sql<number>`CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END`
      : undefined;

const onlyFrom = (move: StatusMove): JobStatus => {
  if (move.from.length !== 1)
    throw new Error(`a claim or renewal leaves exactly one status (got ${move.from.join(', ')})`);
  return move.from[0]!;
};

export interface TransitionSpec extends StatusMove {
  owner?: string;
  /** When set, only the holder of this lease may make the change. */
  leaseOwner?: string;
  /** When set, only if the lease expired before this time (a dead worker's job). */
  leaseExpiredBefore?: number;
  /** When set, only if the job's deadline passed before this time. */
  deadlineBefore?: number;
  set?: Omit<Updateable<JobsTable>, 'status' | 'uuid'>;
  attempts?: AttemptsRule;
  /** Terminal moves: the job's data is purged this long after now, unless the job has a retention of its own. */
  retentionMs?: number;
  now: number;
}

/**
 * One conditional state change: UPDATE … WHERE status IN (from) [AND lease/owner]. Returns the
 * updated row, or undefined when the job was not in one of the `from` states (someone else got
 * there first). Run it inside the caller's transaction when something must be written with it
 * (the webhook outbox row).
 */
export function updateState(db: Kysely<Database>, uuid: string, spec: TransitionSpec): Promise<JobRow | undefined> {
  const attempts = attemptsSet(spec.attempts);
  let q = db
    .updateTable('jobs')
    .set({
      ...spec.set,
      status: spec.to,
      updated_at: spec.now,
      ...(attempts ? { attempts } : {}),
      ...(spec.retentionMs !== undefined
        ? { purge_at: sql<number>`${spec.now} + coalesce(retention_ms, ${spec.retentionMs})` }
        : {}),
    })
    .where('uuid', '=', uuid)
    .where('status', 'in', spec.from);
  if (spec.owner !== undefined) q = q.where('owner', '=', spec.owner);
  if (spec.leaseOwner !== undefined) q = q.where('lease_owner', '=', spec.leaseOwner);
  if (spec.leaseExpiredBefore !== undefined) q = q.where('lease_expires_at', '<', spec.leaseExpiredBefore);
  if (spec.deadlineBefore !== undefined) q = q.where('deadline', '<', spec.deadlineBefore);
  return q.returningAll().executeTakeFirst();
}

export interface ClaimSpec {
  /** queued → processing, from the transition table. */
  move: StatusMove;
  /** The lease token written on every claimed job (unique per claim). */
  leaseOwner: string;
  leaseMs: number;
  now: number;
  /** Job types this worker runs; each is claimed from its own index range. */
  jobTypes: readonly string[];
  /** At most this many jobs. */
  limit: number;
}

const claimSet = (spec: ClaimSpec) => {
  const { to, detail, attempts } = spec.move;
  if (typeof detail !== 'string' || attempts !== 'count')
    throw new Error('a claim shows a detail and counts an attempt');
  return sql`status = ${statusLit(to)}, status_detail = ${detail}, progress = NULL,
  lease_owner = ${spec.leaseOwner}, lease_expires_at = ${spec.now + spec.leaseMs}, attempts = ${attemptsSet(attempts)},
  started_at = coalesce(started_at, ${spec.now}), updated_at = ${spec.now}`;
};

/**
 * Claims up to `limit` queued jobs of the given types, in claim order (vtime, created_at, uuid),
 * in one statement. Each type is an index seek to the head of its own range of `jobs_queue_type`,
 * so neither the backlog nor other types' jobs add cost. PostgreSQL locks the picked rows with
 * SKIP LOCKED, so concurrent claimers take different jobs without waiting on each other.
 *
 * Priority: a picked head's slot (its vtime) is the owner's turn; the owner's best-ranked queued
 * job of that type (`jobs_queue_rank`, one seek per picked job) takes the turn, and the head takes
 * that job's later slot. An owner's set of slots never changes, so neither does the order between
 * owners; without priorities the seek finds nothing (rank is created_at). Ranks compare as
 * (rank, uuid): two jobs made in one millisecond tie on rank, and their time-ordered uuids keep
 * them in submission order.
 */
export async function claimJobs(db: Kysely<Database>, dialect: Dialect, spec: ClaimSpec): Promise<JobRow[]> {
  if (spec.jobTypes.length === 0 || spec.limit <= 0) return [];
  const k = spec.limit;
  const from = statusLit(onlyFrom(spec.move));
  if (dialect === 'postgres') {
    const arms = spec.jobTypes.map(
      (t, i) => sql`${sql.raw(`c${i}`)} AS (SELECT uuid, owner, job_type, rank, vtime, created_at FROM jobs
        WHERE status = ${from} AND job_type = ${t}
        ORDER BY vtime, created_at, uuid LIMIT ${k} FOR UPDATE SKIP LOCKED)`,
    );
    const union = sql.join(
      spec.jobTypes.map((_, i) => sql`SELECT * FROM ${sql.raw(`c${i}`)}`),
      sql` UNION ALL `,
    );
    const res = await sql<JobRow>`WITH ${sql.join(arms)},
        pick AS (SELECT * FROM (${union}) u ORDER BY vtime, created_at, uuid LIMIT ${k}),
        cand AS (SELECT p.uuid AS head, p.vtime AS head_vtime, b.uuid AS best, b.vtime AS best_vtime
          FROM pick p CROSS JOIN LATERAL (SELECT j.uuid, j.vtime FROM jobs j
            WHERE j.status = ${from} AND j.owner = p.owner AND j.job_type = p.job_type
              AND (j.rank, j.uuid) < (p.rank, p.uuid)
            ORDER BY j.rank, j.uuid LIMIT 1 FOR UPDATE SKIP LOCKED) b
          WHERE b.uuid NOT IN (SELECT uuid FROM pick)),
        swap AS (SELECT DISTINCT ON (best) head, best, best_vtime FROM cand ORDER BY best, head_vtime),
        moved AS (UPDATE jobs SET vtime = swap.best_vtime FROM swap WHERE jobs.uuid = swap.head RETURNING jobs.uuid),
        take AS (SELECT uuid FROM pick WHERE uuid NOT IN (SELECT head FROM swap) UNION ALL SELECT best FROM swap)
      UPDATE jobs SET ${claimSet(spec)} FROM take WHERE jobs.uuid = take.uuid RETURNING jobs.*`.execute(db);
    return sortClaimed(res.rows);
  }
  // SQLite has one writer: the pick, the swaps and the update cannot interleave with another claim.
  const union = sql.join(
    spec.jobTypes.map(
      (t) => sql`SELECT * FROM (SELECT uuid, owner, job_type, rank, vtime, created_at FROM jobs
        WHERE status = ${from} AND job_type = ${t} ORDER BY vtime, created_at, uuid LIMIT ${k})`,
    ),
    sql` UNION ALL `,
  );
  const run = async (trx: Kysely<Database>) => {
    const picks = await sql<Pick<JobRow, 'uuid' | 'owner' | 'job_type' | 'rank' | 'vtime'>>`SELECT * FROM (${union})
      ORDER BY vtime, created_at, uuid LIMIT ${k}`.execute(trx);
    const taken = new Set(picks.rows.map((p) => p.uuid));
    const take: string[] = [];
    for (const p of picks.rows) {
      const best = await trx
        .selectFrom('jobs')
        .select(['uuid', 'vtime'])
        .where('status', '=', 'queued')
        .where('owner', '=', p.owner)
        .where('job_type', '=', p.job_type)
        .where((eb) => eb(eb.refTuple('rank', 'uuid'), '<', eb.tuple(p.rank, p.uuid)))
        .orderBy('rank')
        .orderBy('uuid')
        .limit(1)
        .executeTakeFirst();
      if (!best || taken.has(best.uuid)) {
        take.push(p.uuid);
        continue;
      }
      await trx.updateTable('jobs').set({ vtime: best.vtime }).where('uuid', '=', p.uuid).execute();
      taken.add(best.uuid);
      take.push(best.uuid);
    }
    if (take.length === 0) return [];
    const res = await sql<JobRow>`UPDATE jobs SET ${claimSet(spec)}
      WHERE status = ${from} AND uuid IN (${sql.join(take)}) RETURNING *`.execute(trx);
    return res.rows;
  };
  return sortClaimed(db.isTransaction ? await run(db) : await db.transaction().execute(run));
}

/** Claim order, as the indexes hold it: (vtime, created_at, uuid). */
function claimOrder(
  a: Pick<JobRow, 'vtime' | 'created_at' | 'uuid'>,
  b: Pick<JobRow, 'vtime' | 'created_at' | 'uuid'>,
) {
  return a.vtime - b.vtime || a.created_at - b.created_at || (a.uuid < b.uuid ? -1 : 1);
}

function sortClaimed(rows: JobRow[]): JobRow[] {
  return rows.sort(claimOrder);
}

/** Queued jobs near the head of the given types' queues, in claim order (OWNER_MAX_RUNNING's path). */
export async function queueHead(db: Kysely<Database>, jobTypes: readonly string[], window: number) {
  const rows = await Promise.all(
    jobTypes.map((t) =>
      db
        .selectFrom('jobs')
        .select(['uuid', 'owner', 'vtime', 'created_at'])
        .where('status', '=', 'queued')
        .where('job_type', '=', t)
        .orderBy('vtime')
        .orderBy('created_at')
        .orderBy('uuid')
        .limit(window)
        .execute(),
    ),
  );
  return rows.flat().sort(claimOrder).slice(0, window);
}

/** Running jobs per owner, for owners in `owners` (bounded by the number of running jobs). */
export async function runningByOwner(db: Kysely<Database>, owners: readonly string[]): Promise<Map<string, number>> {
  if (owners.length === 0) return new Map();
  const rows = await db
    .selectFrom('jobs')
    .select(['owner', (eb) => eb.fn.countAll<number>().as('n')])
    .where('status', '=', 'processing')
    .where('owner', 'in', owners)
    .groupBy('owner')
    .execute();
  return new Map(rows.map((r) => [r.owner, r.n]));
}

/** Claims exactly these queued jobs (those still queued); the limited path's second step. */
export async function claimByUuid(db: Kysely<Database>, uuids: readonly string[], spec: ClaimSpec): Promise<JobRow[]> {
  if (uuids.length === 0) return [];
  const res = await sql<JobRow>`UPDATE jobs SET ${claimSet(spec)}
    WHERE status = ${statusLit(onlyFrom(spec.move))} AND uuid IN (${sql.join(uuids)}) RETURNING *`.execute(db);
  return sortClaimed(res.rows);
}

/** Moves jobs behind the queue's current window (an owner at its running limit yields its turn). */
export async function deferJobs(
  db: Kysely<Database>,
  uuids: readonly string[],
  vtime: number,
  now: number,
): Promise<void> {
  if (uuids.length === 0) return;
  await db
    .updateTable('jobs')
    .set({ vtime, updated_at: now })
    .where('status', '=', 'queued')
    .where('uuid', 'in', uuids)
    .execute();
}

/** Serialises limited claims across processes (PostgreSQL), inside the claim's transaction. */
export async function lockLimitedClaims(db: Kysely<Database>, dialect: Dialect): Promise<void> {
  if (dialect === 'postgres') await sql`SELECT pg_advisory_xact_lock(727274001)`.execute(db);
}

/** Renews a lease (and sets the detail); the job's type when this lease still holds it, else undefined. */
export async function renewLease(
  db: Kysely<Database>,
  move: StatusMove,
  uuid: string,
  leaseOwner: string,
  until: number,
  detail?: string,
  progress?: string,
): Promise<string | undefined> {
  const row = await db
    .updateTable('jobs')
    .set({
      status: move.to,
      lease_expires_at: until,
      ...(detail !== undefined ? { status_detail: detail } : {}),
      ...(progress !== undefined ? { progress } : {}),
    })
    .where('uuid', '=', uuid)
    .where('status', '=', onlyFrom(move))
    .where('lease_owner', '=', leaseOwner)
    .returning('job_type')
    .executeTakeFirst();
  return row?.job_type;
}

/** Running jobs whose lease ran out (their worker died or hung), oldest expiry first. */
export function expiredLeases(db: Kysely<Database>, now: number, limit: number) {
  return db
    .selectFrom('jobs')
    .select(['uuid', 'attempts', 'lease_expires_at'])
    .where('status', '=', 'processing')
    .where('lease_expires_at', '<', now)
    .orderBy('lease_expires_at')
    .limit(limit)
    .execute();
}

/** Active jobs whose deadline passed, soonest first (the partial index jobs_deadlines: active deadlines only). */
export function expiredDeadlines(db: Kysely<Database>, now: number, limit: number) {
  return db
    .selectFrom('jobs')
    .select(['uuid', 'status'])
    .where('deadline', 'is not', null)
    .where(sql<boolean>`status IN (${ACTIVE})`)
    .where('deadline', '<', now)
    .orderBy('deadline')
    .limit(limit)
    .execute();
}

/** Finished jobs whose purge is due (retention) or must be retried, soonest first (jobs_purges). */
export function duePurges(db: Kysely<Database>, now: number, limit: number) {
  return db
    .selectFrom('jobs')
    .select(['uuid'])
    .where('purge_at', 'is not', null)
    .where('purge_at', '<=', now)
    .orderBy('purge_at')
    .limit(limit)
    .execute();
}

/**
 * The first half of a purge, in the caller's transaction: the job's input, webhook and its
 * deliveries' URL, secret and bodies are erased, and its result stops being handed out
 * (result_deleted_at). purge_at becomes now, so housekeeping retries the blob deletion if it
 * fails; markPurged ends it. Undefined when the job is not a finished job (of `owner`) with data.
 */
export async function eraseJobData(
  db: Kysely<Database>,
  uuid: string,
  spec: { from: readonly JobStatus[]; owner?: string; now: number },
): Promise<JobRow | undefined> {
  let q = db
    .updateTable('jobs')
    .set({
      input: '{}',
      webhook: null,
      progress: null,
      result_deleted_at: sql<number>`coalesce(result_deleted_at, ${spec.now})`,
      purge_at: spec.now,
      updated_at: spec.now,
    })
    .where('uuid', '=', uuid)
    .where('status', 'in', spec.from)
    .where('data_removed_at', 'is', null);
  if (spec.owner !== undefined) q = q.where('owner', '=', spec.owner);
  const row = await q.returningAll().executeTakeFirst();
  if (!row) return undefined;
  // Delivery history stays (attempt times and statuses); what the client sent does not.
  await db
    .updateTable('webhook_events')
    .set({ url: '', destination: null, secret: null, body: '{}', updated_at: spec.now })
    .where('job_uuid', '=', uuid)
    .execute();
  await db
    .updateTable('webhook_events')
    .set({ state: 'failed', next_attempt_at: null, lease_owner: null, lease_expires_at: null })
    .where('job_uuid', '=', uuid)
    .where('state', '=', 'pending')
    .execute();
  return row;
}

/** The second half: the blobs are gone, the job is a tombstone. */
export async function markPurged(
  db: Kysely<Database>,
  uuid: string,
  spec: { from: readonly JobStatus[]; now: number },
): Promise<boolean> {
  const res = await db
    .updateTable('jobs')
    .set({ data_removed_at: spec.now, purge_at: null, updated_at: spec.now })
    .where('uuid', '=', uuid)
    .where('status', 'in', spec.from)
    .where('data_removed_at', 'is', null)
    .executeTakeFirst();
  return Number(res.numUpdatedRows) > 0;
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
export function listJobs(db: Kysely<Database>, spec: ListSpec): Promise<JobView[]> {
  let q = db.selectFrom('jobs').select(VIEW_COLUMNS).where('owner', '=', spec.owner);
  if (spec.status) q = q.where('status', '=', spec.status);
  if (spec.jobType) q = q.where('job_type', '=', spec.jobType);
  if (spec.before) {
    const { createdAt, uuid } = spec.before;
    q = q.where((eb) =>
      eb.or([eb('created_at', '<', createdAt), eb.and([eb('created_at', '=', createdAt), eb('uuid', '<', uuid)])]),
    );
  }
  return q.orderBy('created_at', 'desc').orderBy('uuid', 'desc').limit(spec.limit).execute();
}

/**
 * How many queued jobs are ahead of this one in claim order, counting at most `cap` (an index
 * range of at most `cap` entries, whatever the backlog). Returns `cap` when there are at least
 * that many.
 */
export async function jobsAhead(
  db: Kysely<Database>,
  job: Pick<JobRow, 'vtime' | 'created_at' | 'uuid'>,
  cap: number,
): Promise<number> {
  const v = job.vtime;
  const c = job.created_at;
  const row = await sql<{ n: number | string }>`SELECT count(*) AS n FROM (
      SELECT 1 FROM jobs WHERE status = ${QUEUED} AND (vtime, created_at, uuid) < (${v}, ${c}, ${job.uuid})
      ORDER BY vtime, created_at, uuid LIMIT ${cap}) AS ahead`.execute(db);
  return Number(row.rows[0]?.n ?? 0);
}

/** Jobs per active state, from the trigger-maintained counters (a few rows, any backlog). */
export async function countActive(db: Kysely<Database>): Promise<Record<'queued' | 'processing', number>> {
  const row = await db
    .selectFrom('queue_counts')
    .select((eb) => [
      eb.fn.sum<number | string>('queued').as('queued'),
      eb.fn.sum<number | string>('processing').as('processing'),
    ])
    .executeTakeFirst();
  return { queued: Number(row?.queued ?? 0), processing: Number(row?.processing ?? 0) };
}

/**
 * PostgreSQL plans the partial-index seeks above only if it knows how many jobs are queued: with
 * no column statistics (a new table, or one that grew from empty in a burst before autovacuum
 * looked) it assumes `status = 'queued'` matches 0.5 % of rows and may sort the whole queue
 * instead. Callers run this when the queue has grown a lot since the last time (cheap counters
 * tell); one process at a time (advisory lock), ANALYZE samples a bounded number of rows.
 */
export async function refreshPlannerStats(db: Kysely<Database>, dialect: Dialect): Promise<boolean> {
  if (dialect !== 'postgres') return false; // SQLite's planner prefers the indexes without statistics
  return db.transaction().execute(async (trx) => {
    const { rows } = await sql<{ ok: boolean }>`SELECT pg_try_advisory_xact_lock(727274002) AS ok`.execute(trx);
    if (!rows[0]?.ok) return false;
    await sql`ANALYZE jobs`.execute(trx);
    return true;
  });
}
