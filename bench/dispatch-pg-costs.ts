/**
 * What the webhook dispatcher's statements cost the PostgreSQL server per delivery: the CPU of
 * the backends serving a fresh bench database (utime + stime from /proc/<pid>/stat: the server
 * must run on this machine), over the claims (store/webhooks.ts's claimDueEvents) and over the
 * recordings (recordScheduledAttempts: the attempt rows and the events' move), apart; and the
 * table's updates that were HOT (no index entry written).
 *
 * EVENTS due events of one destination (the dispatch bench's ~450-byte bodies, written before
 * the measurement), claimed BATCH at a time and recorded as delivered. A clock tick is 10 ms, so
 * the figures are sums over every batch (at 30,000 events a tick is 0.3 µs per delivery). The
 * claim's commit does not wait for the WAL flush, so the WAL writer process flushes it: its CPU
 * and the server's WAL flushes over the run are printed too (both are the whole server's: other
 * databases' work on a shared server counts in them).
 *
 * The events' jobs have random UUIDs, as the service's (a B-tree entry per recording on a random leaf).
 *
 *   EVENTS=30000 BATCH=250 [FF=fillfactor: 100 is the one before migration 013]
 *     [JOB_INDEX=btree: the job index before migration 016] npx tsx bench/dispatch-pg-costs.ts
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { v7 as timeOrderedUuid } from 'uuid';
import { openStore } from '../src/store/db.js';
import { claimDueEvents, recordScheduledAttempts } from '../src/store/webhooks.js';
import {
  cpuMicros,
  createPgDatabase,
  deliveredAttempt,
  dropPgDatabase,
  insertWebhookEvents,
  serverBackendsCpu,
} from './lib.js';

const EVENTS = Number(process.env.EVENTS ?? 30_000);
const BATCH = Number(process.env.BATCH ?? 250);
const DEST = 'http://127.0.0.1:1';
const OWNER = 'bench-dispatcher';

const url = await createPgDatabase();
const store = await openStore(url);
const admin = new pg.Client({ connectionString: url });
await admin.connect();

const serverCpuUs = async () => (await serverBackendsCpu(admin)).us;

/** The WAL writer's CPU so far (µs) and the server's WAL flushes so far. */
async function walWriter(): Promise<{ us: number; syncs: number }> {
  const { rows } = await admin.query<{ pid: number; syncs: string }>(
    `SELECT pid, (SELECT wal_sync FROM pg_stat_wal) AS syncs FROM pg_stat_activity WHERE backend_type = 'walwriter'`,
  );
  return { us: cpuMicros(rows[0]!.pid) ?? 0, syncs: Number(rows[0]!.syncs) };
}

async function insertEvents(t0: number): Promise<void> {
  if (process.env.FF) await admin.query(`ALTER TABLE webhook_events SET (fillfactor = ${Number(process.env.FF)})`);
  if (process.env.JOB_INDEX === 'btree')
    await admin.query('DROP INDEX webhook_events_job; CREATE INDEX webhook_events_job ON webhook_events (job_uuid)');
  const rows = Array.from({ length: EVENTS }, (_, i) => {
    const id = timeOrderedUuid();
    return {
      event_id: id,
      job_uuid: randomUUID(),
      owner: 'o',
      event_type: 'job.cancelled',
      url: `${DEST}/hook`,
      destination: DEST,
      secret: 'whsec_bench',
      body: JSON.stringify({ event_id: id, pad: 'x'.repeat(300) }),
      state: 'pending' as const,
      next_attempt_at: t0 + i,
      created_at: t0,
      updated_at: t0,
    };
  });
  await insertWebhookEvents(store.db, rows);
}

async function tableUpdates(): Promise<string> {
  await new Promise((r) => setTimeout(r, 1_500)); // backends flush their counters at most once a second
  const { rows } = await admin.query<{ upd: string; hot: string; pages: string }>(
    `SELECT n_tup_upd AS upd, n_tup_hot_upd AS hot, pg_relation_size('webhook_events') / 8192 AS pages
      FROM pg_stat_user_tables WHERE relname = 'webhook_events'`,
  );
  const r = rows[0]!;
  return `webhook_events: ${r.upd} updates (${r.hot} HOT), ${r.pages} pages`;
}

try {
  const t0 = Date.now();
  await insertEvents(t0);
  const now = t0 + EVENTS;
  const spent = { claim: 0, record: 0 };
  let done = 0;
  const wal0 = await walWriter();
  for (;;) {
    const c0 = await serverCpuUs();
    const rows = await claimDueEvents(store.db, 'postgres', {
      leaseOwner: OWNER,
      leaseMs: 60_000,
      now,
      destinations: [{ destination: DEST, limit: BATCH }],
    });
    const c1 = await serverCpuUs();
    if (rows.length === 0) break;
    await recordScheduledAttempts(
      store.db,
      'postgres',
      OWNER,
      rows.map((x) => deliveredAttempt(x.event_id, now)),
      [],
      now,
    );
    const c2 = await serverCpuUs();
    spent.claim += c1 - c0;
    spent.record += c2 - c1;
    done += rows.length;
  }
  const per = (us: number) => (us / done).toFixed(1);
  await new Promise((r) => setTimeout(r, 1_500)); // the last unflushed commits, and the counters
  const wal1 = await walWriter();
  console.log(
    `${done} deliveries, fillfactor ${process.env.FF ?? 'as migrated'}: server CPU per delivery: claim ${per(spent.claim)} µs, ` +
      `record ${per(spent.record)} µs, total ${per(spent.claim + spent.record)} µs; ` +
      `WAL writer ${per(wal1.us - wal0.us)} µs, ${wal1.syncs - wal0.syncs} WAL flushes`,
  );
  console.log(await tableUpdates());
} finally {
  await admin.end();
  await store.close();
  await dropPgDatabase(url);
}
