/**
 * What the webhook dispatcher's SQLite work costs per delivery, in this process (better-sqlite3,
 * WAL, as the store opens it), and what the two proposed "one write less" designs would save:
 *
 * - claim: store/webhooks.ts's claimDueEvents (the lease written on each event row, the columns
 *   returned), against a plain read of the same rows (the lease write's share of the claim);
 * - record: recordScheduledAttempts (an attempt row and the event's move, one transaction);
 * - commit: one small write transaction alone (what claiming inside the recording's transaction
 *   would save per claim transaction: the rows and their pages are written either way);
 * - lease table: the lease kept in a small table of its own (the claim reads the events and
 *   inserts a lease row each; the recording then deletes it besides its own writes).
 *
 * CPU µs per row (user + system), medians of ROUNDS batches of BATCH rows (the dispatch bench's
 * claims take ~270 rows and its recordings up to 500), each claim's rows recorded RECORD at a time.
 * The claims and recordings run on the dispatcher's own connection (openDispatchConnection: a small
 * page cache), as the dispatcher's do; OWN=0 runs them on the store's connection (64 MiB) instead.
 *
 *   BATCH=150 [RECORD=150] ROUNDS=40 [OWN=0] npx tsx bench/dispatch-db-costs.ts
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { v7 as timeOrderedUuid } from 'uuid';
import { openStore, sqliteHandle } from '../src/store/db.js';
import { claimDueEvents, openDispatchConnection, recordScheduledAttempts } from '../src/store/webhooks.js';
import { deliveredAttempt } from './lib.js';

const BATCH = Number(process.env.BATCH ?? 150);
const RECORD = Number(process.env.RECORD ?? BATCH);
const ROUNDS = Number(process.env.ROUNDS ?? 40);
const DEST = 'http://127.0.0.1:1';
const OWNER = 'bench-dispatcher';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mj-dbcosts-'));
const store = await openStore(`sqlite:${path.join(dir, 'db.sqlite')}`);
const conn = sqliteHandle(store.db)!;
const closeOwn = process.env.OWN === '0' ? undefined : openDispatchConnection(store.db);
const t0 = Date.now();

/** Due events of one destination, bodies of the dispatch bench's size (~450-byte rows). */
const insert = conn.prepare(`
  INSERT INTO webhook_events (event_id, job_uuid, owner, event_type, url, destination, secret, body, state,
    attempts, next_attempt_at, created_at, updated_at)
  VALUES (?, ?, 'o', 'job.cancelled', '${DEST}/hook', '${DEST}', 'whsec_bench', ?, 'pending', 0, ?, ?, ?)`);
const total = ROUNDS * BATCH * 4;
conn.transaction(() => {
  for (let i = 0; i < total; i++) {
    // Time-ordered ids (UUIDv7), as the service makes them (src/jobs/outbox.ts).
    const id = timeOrderedUuid();
    insert.run(id, `job-${i}`, JSON.stringify({ event_id: id, pad: 'x'.repeat(300) }), t0 + i, t0, t0);
  }
})();
conn.exec(`CREATE TABLE bench_leases (event_id TEXT PRIMARY KEY, lease_owner TEXT NOT NULL,
  lease_expires_at INTEGER NOT NULL) WITHOUT ROWID`);
const read = conn
  .prepare(
    `SELECT event_id, job_uuid, event_type, url, destination, secret, body, attempts, endpoint_id
    FROM webhook_events w WHERE destination = ? AND state = 'pending' AND next_attempt_at <= ?
      AND (lease_expires_at IS NULL OR lease_expires_at < ?)
      AND NOT EXISTS (SELECT 1 FROM bench_leases l WHERE l.event_id = w.event_id AND l.lease_expires_at >= ?)
    ORDER BY next_attempt_at LIMIT ?`,
  )
  .raw(true);
const lease = conn.prepare(`INSERT INTO bench_leases VALUES (?, ?, ?)
  ON CONFLICT(event_id) DO UPDATE SET lease_owner = excluded.lease_owner, lease_expires_at = excluded.lease_expires_at`);
const unlease = conn.prepare('DELETE FROM bench_leases WHERE event_id = ? AND lease_owner = ?');
const done = conn.prepare("UPDATE webhook_events SET state = 'delivered' WHERE event_id = ?");
conn.exec('CREATE TABLE bench_scratch (k TEXT PRIMARY KEY, v TEXT)');
const scratch = conn.prepare(
  `INSERT INTO bench_scratch VALUES ('k', 'v') ON CONFLICT(k) DO UPDATE SET v = excluded.v || ''`,
);

function cpu(fn: () => unknown): number {
  const c = process.cpuUsage();
  fn();
  const d = process.cpuUsage(c);
  return d.user + d.system;
}

const samples: Record<string, number[]> = {};
const add = (name: string, us: number) => (samples[name] ??= []).push(us);
async function cpuOf<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const c = process.cpuUsage();
  const out = await fn();
  const d = process.cpuUsage(c);
  add(name, d.user + d.system);
  return out;
}

for (let r = 0; r < ROUNDS; r++) {
  const now = t0 + total;
  // Today's design: a claim (the lease on each row), then the recording (SQLite runs both synchronously).
  const rows = await cpuOf('claim (lease on the event row)', () => claimDueEvents(store.db, 'sqlite', spec(now)));
  const attempts = rows.map((x) => deliveredAttempt(x.event_id, now));
  await cpuOf('record (attempt row + move)', async () => {
    for (let i = 0; i < attempts.length; i += RECORD)
      await recordScheduledAttempts(store.db, 'sqlite', OWNER, attempts.slice(i, i + RECORD), [], now);
  });
  // The same rows' columns, read with no lease written.
  add(
    'read of the rows claimed, no lease',
    cpu(() => conn.transaction(() => read.all(DEST, now, now, now, BATCH)).immediate()),
  );
  // Quantised by the clock for one: a hundred, averaged (reported per transaction).
  add(
    'bare commit, per transaction',
    cpu(() => {
      for (let i = 0; i < 100; i++) conn.transaction(() => scratch.run()).immediate();
    }) *
      (BATCH / 100),
  );
  // The lease in a table of its own: the claim inserts one lease row each, the recording deletes it.
  let leased: unknown[][] = [];
  add(
    'lease table: claim',
    cpu(() =>
      conn
        .transaction(() => {
          leased = read.all(DEST, now, now, now, BATCH) as unknown[][];
          for (const l of leased) lease.run(l[0], OWNER, now + 60_000);
        })
        .immediate(),
    ),
  );
  add(
    "lease table: recording's extra delete",
    cpu(() =>
      conn
        .transaction(() => {
          for (const l of leased) unlease.run(l[0], OWNER);
        })
        .immediate(),
    ),
  );
  // Out of the way of the next round.
  conn.transaction(() => leased.forEach((l) => done.run(l[0]))).immediate();
}

function spec(now: number) {
  return { leaseOwner: OWNER, leaseMs: 60_000, now, destinations: [{ destination: DEST, limit: BATCH }] };
}

const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!;
for (const [name, v] of Object.entries(samples))
  process.stdout.write(
    `${name}: ${(median(v.slice(5)) / BATCH).toFixed(2)} µs${name.includes('per ') ? '' : ' per row'}\n`,
  );
await closeOwn?.();
await store.close();
fs.rmSync(dir, { recursive: true, force: true });
