import { CompiledQuery, sql } from 'kysely';
import { openStore, sqliteHandle } from '../src/store/db.js';
import {
  claimDueEvents,
  claimDueEventsQuery,
  dueDestinations,
  dueDestinationsQuery,
  nextDueAt,
  pendingDestinations,
  pendingDestinationsQuery,
  PG_CLAIM,
  PG_RECORD,
  pgClaimParams,
  pgRecordParams,
  recordScheduledAttempts,
  SQLITE_DIRECT_SQL,
} from '../src/store/webhooks.js';

const url = process.argv[2]!;
const store = await openStore(url);
const db = store.db;
const pg = store.dialect === 'postgres';
const NOW = 1_700_000_000_000;
/** Destinations whose only pending event is scheduled an hour ahead (receivers in back-off). */
const BACKOFF = 10_000;
const count = Number((await sql<{ n: string }>`SELECT count(*) AS n FROM webhook_events`.execute(db)).rows[0]!.n);
if (count === 0) {
  console.time('fill');
  // 1M delivered (200 destinations), 20k pending: 10k due at 'dead' dest, 10k due over 50 dests, 2k future;
  // and BACKOFF destinations in back-off (one event each, due in an hour).
  const DELIVERED = 1_000_000;
  if (pg) {
    await sql`INSERT INTO webhook_events (event_id, job_uuid, owner, event_type, url, destination, secret, body, state, attempts, next_attempt_at, created_at, updated_at)
      SELECT 'd' || g, 'j' || g, 'o', 'job.completed', 'http://h' || (g % 200) || '.example/hook', 'http://h' || (g % 200) || '.example', NULL, '{}', 'delivered', 1, NULL, ${NOW}::bigint - g, ${NOW}::bigint
      FROM generate_series(1, ${DELIVERED}) g`.execute(db);
    await sql`INSERT INTO webhook_events (event_id, job_uuid, owner, event_type, url, destination, secret, body, state, attempts, next_attempt_at, created_at, updated_at)
      SELECT 'p' || g, 'j' || g, 'o', 'job.completed', 'http://x/hook', CASE WHEN g <= 10000 THEN 'http://dead.example' ELSE 'http://p' || (g % 50) || '.example' END, NULL, '{}', 'pending', 0,
        CASE WHEN g > 20000 THEN ${NOW}::bigint + g ELSE ${NOW}::bigint - 100000 + g END, ${NOW}::bigint, ${NOW}::bigint
      FROM generate_series(1, 22000) g`.execute(db);
    await sql`INSERT INTO webhook_events (event_id, job_uuid, owner, event_type, url, destination, secret, body, state, attempts, next_attempt_at, created_at, updated_at)
      SELECT 'b' || g, 'jb' || g, 'o', 'job.completed', 'http://b' || g || '.example/hook', 'http://b' || g || '.example', NULL, '{}', 'pending', 2,
        ${NOW}::bigint + 3600000 + g, ${NOW}::bigint, ${NOW}::bigint
      FROM generate_series(1, ${BACKOFF}) g`.execute(db);
    await sql`ANALYZE webhook_events`.execute(db);
  } else {
    await sql`WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < ${DELIVERED})
      INSERT INTO webhook_events (event_id, job_uuid, owner, event_type, url, destination, secret, body, state, attempts, next_attempt_at, created_at, updated_at)
      SELECT 'd' || x, 'j' || x, 'o', 'job.completed', 'http://h' || (x % 200) || '.example/hook', 'http://h' || (x % 200) || '.example', NULL, '{}', 'delivered', 1, NULL, ${NOW} - x, ${NOW} FROM g`.execute(
      db,
    );
    await sql`WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < 22000)
      INSERT INTO webhook_events (event_id, job_uuid, owner, event_type, url, destination, secret, body, state, attempts, next_attempt_at, created_at, updated_at)
      SELECT 'p' || x, 'j' || x, 'o', 'job.completed', 'http://x/hook', CASE WHEN x <= 10000 THEN 'http://dead.example' ELSE 'http://p' || (x % 50) || '.example' END, NULL, '{}', 'pending', 0,
        CASE WHEN x > 20000 THEN ${NOW} + x ELSE ${NOW} - 100000 + x END, ${NOW}, ${NOW} FROM g`.execute(db);
    await sql`WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < ${BACKOFF})
      INSERT INTO webhook_events (event_id, job_uuid, owner, event_type, url, destination, secret, body, state, attempts, next_attempt_at, created_at, updated_at)
      SELECT 'b' || x, 'jb' || x, 'o', 'job.completed', 'http://b' || x || '.example/hook', 'http://b' || x || '.example', NULL, '{}', 'pending', 2,
        ${NOW} + 3600000 + x, ${NOW}, ${NOW} FROM g`.execute(db);
    await sql`ANALYZE`.execute(db);
  }
  console.timeEnd('fill');
}

async function timeit(name: string, f: () => Promise<unknown>, n = 50) {
  await f();
  const t = performance.now();
  for (let i = 0; i < n; i++) await f();
  console.log(`${name}: ${((performance.now() - t) / n).toFixed(3)} ms`);
}
await timeit('pendingDestinations(64)', () => pendingDestinations(db, '', 64));
console.log(await pendingDestinations(db, '', 3));
await timeit('nextDueAt', () => nextDueAt(db, NOW));
// The dispatcher's look: the most overdue claimable events' destinations (a backlog here: 20k due)...
await timeit('dueDestinations(256)', () => dueDestinations(db, NOW, 256));
// ...and with nothing due yet, BACKOFF destinations waiting: one empty range, where pages of
// pendingDestinations would read every destination with a pending event.
await timeit('dueDestinations(256), nothing due', () => dueDestinations(db, NOW - 200_000, 256));
await timeit(
  `pendingDestinations, every page (${BACKOFF + 51} destinations)`,
  async () => {
    let after = '';
    for (;;) {
      const page = await pendingDestinations(db, after, 64);
      if (page.length < 64) return;
      after = page[63]!.destination;
    }
  },
  3,
);
// Claim then release (in a transaction rolled back) to keep the data unchanged.
class Rollback extends Error {}
async function claimOnce(dests: Array<{ destination: string; limit: number }>) {
  let n = 0;
  await db
    .transaction()
    .execute(async (trx) => {
      const rows = await claimDueEvents(trx, store.dialect, {
        leaseOwner: 'X',
        leaseMs: 1000,
        now: NOW,
        destinations: dests,
      });
      n = rows.length;
      throw new Rollback();
    })
    .catch((e: unknown) => {
      if (!(e instanceof Rollback)) throw e;
    });
  return n;
}
const fifty = Array.from({ length: 50 }, (_, i) => ({ destination: `http://p${i}.example`, limit: 4 }));
console.log('claimed', await claimOnce([{ destination: 'http://dead.example', limit: 16 }, ...fifty]));
await timeit(
  'claim dead(16) + 50 dests(4)',
  () => claimOnce([{ destination: 'http://dead.example', limit: 16 }, ...fifty]),
  20,
);
await timeit('claim 1 dest(16)', () => claimOnce([{ destination: 'http://p7.example', limit: 16 }]), 50);

// EXPLAIN
const explain = async (q: { sql: string; parameters: readonly unknown[] }) => {
  const prefix = pg ? 'EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ' : 'EXPLAIN QUERY PLAN ';
  const rows = (
    await (db as any).executeQuery({ sql: prefix + q.sql, parameters: q.parameters, query: { kind: 'RawNode' } })
  ).rows;
  for (const r of rows) console.log('   ', pg ? r['QUERY PLAN'] : `${r.id}/${r.parent} ${r.detail}`);
};
console.log('--- pendingDestinations');
await explain(pendingDestinationsQuery('', 64).compile(db));
console.log('--- dueDestinations (a backlog due)');
await explain(dueDestinationsQuery(NOW, 256).compile(db));
console.log('--- dueDestinations (nothing due)');
await explain(dueDestinationsQuery(NOW - 200_000, 256).compile(db));
console.log('--- nextDueAt');
await explain(
  db
    .selectFrom('webhook_events')
    .select('next_attempt_at')
    .where('state', '=', sql.lit('pending') as any)
    .where('next_attempt_at', '>', NOW)
    .orderBy('next_attempt_at')
    .limit(1)
    .compile(),
);
// A job's events (webhook_events_job: a hash index on PostgreSQL since migration 016), as the job's
// webhook log reads them and a purge rewrites them.
console.log("--- a job's events");
await explain(
  db
    .selectFrom('webhook_events')
    .selectAll()
    .where('job_uuid', '=', 'j500000')
    .where('owner', '=', 'o')
    .where('endpoint_id', 'is', null)
    .orderBy('created_at')
    .orderBy('event_id')
    .compile(),
);
console.log("--- a job's attempts");
await explain(
  db
    .selectFrom('webhook_attempts')
    .selectAll()
    .where('event_id', 'in', (eb) =>
      eb.selectFrom('webhook_events').select('event_id').where('job_uuid', '=', 'j500000').where('owner', '=', 'o'),
    )
    .orderBy('id')
    .compile(),
);
console.log('--- claim (dead: 16, p7: 4)');
await db
  .transaction()
  .execute(async (trx) => {
    const spec = {
      leaseOwner: 'X',
      leaseMs: 1000,
      now: NOW,
      destinations: [
        { destination: 'http://dead.example', limit: 16 },
        { destination: 'http://p7.example', limit: 4 },
      ],
    };
    const q = pg ? CompiledQuery.raw(PG_CLAIM.text, pgClaimParams(spec)) : claimDueEventsQuery(spec)!.compile(db);
    const prefix = pg ? 'EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ' : 'EXPLAIN QUERY PLAN ';
    const rows = (await trx.executeQuery({ ...q, sql: prefix + q.sql })).rows as any[];
    for (const r of rows) console.log('   ', pg ? r['QUERY PLAN'] : `${r.id}/${r.parent} ${r.detail}`);
    throw new Rollback();
  })
  .catch((e: unknown) => {
    if (!(e instanceof Rollback)) throw e;
  });
// SQLite's dispatcher runs prepared statements of its own outside any Kysely transaction.
const conn = sqliteHandle(db);
if (conn) {
  const params: Record<keyof typeof SQLITE_DIRECT_SQL, unknown[]> = {
    // After a cursor (the dispatcher's claims while a destination's claims come back full).
    pick: ['http://p7.example', NOW - 100_000 + 5_000, 'p5000', NOW, NOW, 16],
    lease: ['X', NOW + 1000, '[1, 2, 3]'],
    insertAttempt: ['p7', 'p7', NOW, 1, 200, null, 1, 0],
    moveOn: ['delivered', null, NOW, 'p7', 'X', 0],
    release: [NOW, 'p7', 'X'],
  };
  for (const [name, text] of Object.entries(SQLITE_DIRECT_SQL)) {
    console.log(`--- direct ${name}`);
    const plan = conn.prepare(`EXPLAIN QUERY PLAN ${text}`).all(...params[name as keyof typeof params]);
    for (const r of plan as Array<{ id: number; parent: number; detail: string }>)
      console.log(`    ${r.id}/${r.parent} ${r.detail}`);
  }
}
/**
 * The dispatcher runs PG_CLAIM and PG_RECORD as named statements, which PostgreSQL plans once
 * (a generic plan, without the parameters' values): print that plan, run on the same data.
 */
async function explainGeneric(name: string, text: string, types: string, values: unknown[]) {
  const lit = (v: unknown): string =>
    Array.isArray(v)
      ? `ARRAY[${v.map(lit).join(', ')}]`
      : typeof v === 'number'
        ? String(v)
        : `'${String(v).replace(/'/g, "''")}'`;
  await db
    .transaction()
    .execute(async (trx) => {
      await sql`SET LOCAL plan_cache_mode = force_generic_plan`.execute(trx);
      await sql.raw(`PREPARE ${name}(${types}) AS ${text}`).execute(trx);
      const { rows } = await sql
        .raw<{ 'QUERY PLAN': string }>(
          `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE ${name}(${values.map(lit).join(', ')})`,
        )
        .execute(trx);
      for (const r of rows) console.log('   ', r['QUERY PLAN']);
      throw new Rollback();
    })
    .catch((e: unknown) => {
      if (!(e instanceof Rollback)) throw e;
    });
}
if (pg) {
  console.log('--- claim, generic plan (dead: 16 after its 5,000th event, p7: 4)');
  const spec = {
    leaseOwner: 'X',
    leaseMs: 1000,
    now: NOW,
    destinations: [
      { destination: 'http://dead.example', limit: 16, after: { at: NOW - 100_000 + 5_000, eventId: 'p5000' } },
      { destination: 'http://p7.example', limit: 4 },
    ],
  };
  await explainGeneric(
    'claim',
    PG_CLAIM.text,
    'text[], int[], bigint, text, bigint, bigint[], text[]',
    pgClaimParams(spec)!,
  );
}
console.log('--- record');
{
  const rows = await claimDueEvents(db, store.dialect, {
    leaseOwner: 'X',
    leaseMs: 1000,
    now: NOW,
    destinations: [{ destination: 'http://p7.example', limit: 32 }],
  });
  const outcomes = rows.map((r) => ({
    eventId: r.event_id,
    claimedAttempts: r.attempts,
    attempt: { startedAt: NOW, durationMs: 1, httpStatus: 200, error: null, ok: true, manual: false },
    state: 'delivered' as const,
    nextAttemptAt: null,
    now: NOW,
  }));
  if (pg)
    await db
      .transaction()
      .execute(async (trx) => {
        const q = CompiledQuery.raw(PG_RECORD.text, pgRecordParams('X', outcomes, NOW));
        const plan = await trx.executeQuery({ ...q, sql: `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${q.sql}` });
        for (const r of plan.rows as any[]) console.log('   ', r['QUERY PLAN']);
        throw new Rollback();
      })
      .catch((e: unknown) => {
        if (!(e instanceof Rollback)) throw e;
      });
  if (pg) {
    console.log('--- record, generic plan');
    await explainGeneric('record', PG_RECORD.text, 'json, bigint, text', pgRecordParams('X', outcomes, NOW));
  }
  const t = performance.now();
  const applied = await recordScheduledAttempts(db, store.dialect, 'X', outcomes, [], NOW);
  console.log(`record ${rows.length}: applied ${applied.size} in ${(performance.now() - t).toFixed(2)} ms`);
  // Put them back, due.
  const ids = rows.map((r) => r.event_id);
  await db
    .updateTable('webhook_events')
    .set({ state: 'pending', attempts: 0, next_attempt_at: NOW })
    .where('event_id', 'in', ids)
    .execute();
  await db.deleteFrom('webhook_attempts').where('event_id', 'in', ids).execute();
}
await store.close();
