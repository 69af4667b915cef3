/**
 * EXPLAIN of every owner-endpoint query (store/webhook-endpoints.ts and the job-delivery list's
 * filter) over a million per-job deliveries and 200k endpoint deliveries, on either database:
 *
 *   npx tsx bench/endpoints-explain.ts sqlite:/tmp/endpoints.sqlite
 *   npx tsx bench/endpoints-explain.ts postgres://postgres@127.0.0.1:5432/endpoints_explain
 *
 * Each plan must be an index range of one endpoint (or one owner, or one job), never a scan of
 * webhook_events. Fills the database on first run only.
 */
import { sql, type Compilable } from 'kysely';
import { openStore } from '../src/store/db.js';

const url = process.argv[2]!;
const store = await openStore(url);
const db = store.db;
const pg = store.dialect === 'postgres';
const NOW = 1_700_000_000_000;
const JOB_DELIVERIES = 1_000_000;
const ENDPOINT_DELIVERIES = 200_000;
const ENDPOINTS = 100;

const count = Number((await sql<{ n: string }>`SELECT count(*) AS n FROM webhook_events`.execute(db)).rows[0]!.n);
if (count === 0) {
  console.time('fill');
  const series = (n: number, body: ReturnType<typeof sql>) =>
    pg
      ? sql`INSERT INTO webhook_events (event_id, job_uuid, owner, event_type, url, destination, secret, body, state, attempts, next_attempt_at, created_at, updated_at, endpoint_id)
          SELECT ${body} FROM generate_series(1, ${sql.lit(n)}) x`
      : sql`WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < ${sql.lit(n)})
          INSERT INTO webhook_events (event_id, job_uuid, owner, event_type, url, destination, secret, body, state, attempts, next_attempt_at, created_at, updated_at, endpoint_id)
          SELECT ${body} FROM g`;
  // Per-job deliveries, all delivered; then endpoint deliveries: mostly delivered, 1% failed, 1% skipped, 1% pending.
  await series(
    JOB_DELIVERIES,
    sql`'d' || x, 'j' || x, 'o' || (x % 1000), 'job.completed', 'http://h.example/hook', 'http://h.example', NULL, '{}', 'delivered', 1, NULL, ${sql.lit(NOW)} - x, ${sql.lit(NOW)}, NULL`,
  ).execute(db);
  await series(
    ENDPOINT_DELIVERIES,
    sql`'e' || x, 'j' || x, 'o' || (x % ${sql.lit(ENDPOINTS)}), 'job.completed', 'http://e.example/hook', 'http://e.example', NULL, '{"x":1}',
      CASE x % 100 WHEN 0 THEN 'failed' WHEN 1 THEN 'skipped' WHEN 2 THEN 'pending' ELSE 'delivered' END, 1,
      CASE x % 100 WHEN 2 THEN ${sql.lit(NOW)} ELSE NULL END, ${sql.lit(NOW)} - x, ${sql.lit(NOW)}, 'ep_' || (x % ${sql.lit(ENDPOINTS)})`,
  ).execute(db);
  const endpoints = Array.from({ length: ENDPOINTS }, (_, i) => ({
    id: `ep_${i}`,
    owner: `o${i}`,
    url: 'http://e.example/hook',
    events: '["job.completed"]',
    description: '',
    secret: 'whsec_x',
    status: i % 10 === 0 ? 'disabled' : 'enabled',
    disabled_at: i % 10 === 0 ? NOW : null,
    created_at: NOW - i,
    updated_at: NOW,
  }));
  await db
    .insertInto('webhook_endpoints')
    .values(endpoints as never)
    .execute();
  await sql`ANALYZE`.execute(db);
  console.timeEnd('fill');
}

async function explain(name: string, q: Compilable) {
  const compiled = q.compile();
  const prefix = pg ? 'EXPLAIN (COSTS OFF) ' : 'EXPLAIN QUERY PLAN ';
  const { rows } = await db.executeQuery({ ...compiled, sql: prefix + compiled.sql });
  const plan = rows.map((r) => (pg ? (r as { 'QUERY PLAN': string })['QUERY PLAN'] : (r as { detail: string }).detail));
  console.log(`\n== ${name}\n${plan.join('\n')}`);
}

const events = () => db.updateTable('webhook_events');
await explain(
  'endpointsOfOwners (fan-out)',
  db.selectFrom('webhook_endpoints').selectAll().where('owner', 'in', ['o1', 'o2']).orderBy('created_at'),
);
await explain('endpointsByIds', db.selectFrom('webhook_endpoints').selectAll().where('id', 'in', ['ep_1', 'ep_2']));
await explain(
  'listEndpoints',
  db.selectFrom('webhook_endpoints').selectAll().where('owner', '=', 'o1').orderBy('created_at', 'desc').limit(20),
);
await explain(
  'skipPending (disable, delete)',
  events()
    .set({ state: 'skipped' })
    .where('endpoint_id', '=', 'ep_1')
    .where(sql<boolean>`endpoint_id IS NOT NULL AND state = 'pending'`),
);
await explain(
  'recoverDeliveries',
  events()
    .set({ state: 'pending', attempts: 0 })
    .where('endpoint_id', '=', 'ep_1')
    .where(sql<boolean>`endpoint_id IS NOT NULL AND state IN ('failed', 'skipped')`)
    .where('created_at', '>=', NOW - 50_000)
    .where('body', '<>', '{}'),
);
await explain(
  'endpointDeliveries (log page, with a cursor)',
  db
    .selectFrom('webhook_events')
    .selectAll()
    .where('endpoint_id', '=', 'ep_1')
    .where(sql<boolean>`endpoint_id IS NOT NULL`)
    .where(sql<boolean>`(created_at, event_id) < (${NOW - 1000}, ${'e1000'})`)
    .orderBy('created_at', 'desc')
    .orderBy('event_id', 'desc')
    .limit(51),
);
await explain(
  "a job's own deliveries (endpoint_id IS NULL)",
  db
    .selectFrom('webhook_events')
    .selectAll()
    .where('job_uuid', '=', 'j5')
    .where('owner', '=', 'o5')
    .where('endpoint_id', 'is', null),
);
await explain(
  'recentlyDisabledEndpoints (operator)',
  db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('status', '=', 'disabled')
    .orderBy('disabled_at', 'desc')
    .limit(20),
);
await store.close();
