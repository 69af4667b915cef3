/**
 * What the parts of a SQLite status read cost, in this process (better-sqlite3, WAL, as the store
 * opens it): the point read of the status columns outside and inside a transaction (the difference
 * is the WAL read lock each autocommit statement takes and drops), and the checks that tell whether
 * the database changed (`PRAGMA data_version`, `total_changes()`), alone and as store/unchanged-reads.ts
 * runs them. CPU µs per call (user + system), after a warm-up.
 *
 *   npx tsx bench/status-read-costs.ts
 */
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { freshStore, httpClient, NOOP_BODY, NOOP_PATH, startService, waitUntil } from './lib.js';

const VIEW =
  'uuid, owner, job_type, model, status, status_detail, error_type, error_message, result_key, result_content_type, ' +
  'result_size, result_deleted_at, vtime, created_at, started_at, finished_at, deadline, priority, progress, ' +
  'data_removed_at, retention_ms, purge_at';

function time(name: string, fn: () => unknown, n = 200_000): void {
  for (let i = 0; i < 20_000; i++) fn();
  const t0 = process.cpuUsage();
  for (let i = 0; i < n; i++) fn();
  const t = process.cpuUsage(t0);
  process.stdout.write(`${name}: ${((t.user + t.system) / n).toFixed(2)} µs (system ${(t.system / n).toFixed(2)})\n`);
}

// A completed job in a fresh database, made by the service itself.
const store = await freshStore('sqlite');
const svc = await startService(store, { role: 'all', env: { WORKER_CONCURRENCY: '1' } });
const c = httpClient(svc.base, store.key, 1);
const uuid = (await c.call('POST', NOOP_PATH, NOOP_BODY)).json.data.uuid as string;
await waitUntil(
  'the job to complete',
  async () => (await c.call('GET', `/api/v1/jobs/${uuid}/status`)).json.data?.status === 'completed',
);
await c.close();
await svc.stop();

const db = new SQLite(path.join(store.dataDir, 'media-jobs.sqlite'));
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
db.pragma('cache_size = -65536');
const owner = db.prepare<[string], string>('SELECT owner FROM jobs WHERE uuid = ?').pluck().get(uuid)!;
const read = db.prepare(`SELECT ${VIEW} FROM jobs WHERE uuid = ? AND owner = ?`).raw(true);
const begin = db.prepare('BEGIN');
const commit = db.prepare('COMMIT');
const dataVersion = db.prepare('PRAGMA data_version').pluck();
const totalChanges = db.prepare('SELECT total_changes()').pluck();
try {
  time('point read (autocommit)', () => read.get(uuid, owner));
  time('PRAGMA data_version (autocommit)', () => dataVersion.get());
  time('SELECT total_changes()', () => totalChanges.get());
  time('BEGIN + COMMIT', () => {
    begin.run();
    commit.run();
  });
  time('a kept read: BEGIN, data_version, total_changes, COMMIT', () => {
    begin.run();
    dataVersion.get();
    totalChanges.get();
    commit.run();
  });
  time('a miss: the same with the point read', () => {
    begin.run();
    dataVersion.get();
    totalChanges.get();
    read.get(uuid, owner);
    commit.run();
  });
  begin.run();
  time('point read inside a transaction', () => read.get(uuid, owner));
  commit.run();
} finally {
  db.close();
  await store.dispose();
}
