/**
 * What an attempt row costs the database alone, per table shape: the question being whether
 * `webhook_attempts` keyed by what is read (event_id, attempt) instead of a serial id (its primary
 * key's B-tree, and a sequence or SQLite's sqlite_sequence row) would make the dispatcher's
 * recording cheaper. PostgreSQL: the backend's CPU (utime + stime from /proc: the server must run
 * on this machine) over N rows inserted BATCH at a time from a JSON batch, as the recording
 * inserts them (time-ordered event ids, one attempt each); `decode` is the JSON batch alone (a
 * SELECT), so each shape's row costs its figure minus decode's. SQLite: this process's CPU over
 * the same rows, one prepared INSERT per row in a transaction per batch (as the dispatcher's own
 * connection does), on a file in a temporary directory. Shapes run alternated, ROUNDS times.
 *
 *   N=200000 BATCH=250 ROUNDS=3 npx tsx bench/attempt-row-costs.ts
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { v7 as timeOrderedUuid } from 'uuid';
import { cpuMicros, createPgDatabase, dropPgDatabase } from './lib.js';

const N = Number(process.env.N ?? 200_000);
const BATCH = Number(process.env.BATCH ?? 250);
const ROUNDS = Number(process.env.ROUNDS ?? 3);

const COLUMNS = `event_id text NOT NULL, attempt integer NOT NULL, started_at bigint NOT NULL,
  duration_ms integer NOT NULL, http_status integer, error text, ok integer NOT NULL, manual integer NOT NULL DEFAULT 0`;
/** Each shape's DDL (table t); `decode` has no insert. */
const PG_SHAPES: Record<string, string> = {
  decode: `CREATE TABLE t (${COLUMNS})`,
  'serial id + event index (migration 001)': `CREATE TABLE t (id bigserial PRIMARY KEY, ${COLUMNS}); CREATE INDEX t_event ON t (event_id)`,
  'keyed (event_id, attempt)': `CREATE TABLE t (${COLUMNS}, PRIMARY KEY (event_id, attempt))`,
  'event index, no id': `CREATE TABLE t (${COLUMNS}); CREATE INDEX t_event ON t (event_id)`,
  'heap alone': `CREATE TABLE t (${COLUMNS})`,
};
const SQLITE_SHAPES: Record<string, string> = {
  'AUTOINCREMENT id + event index (migration 001)': `CREATE TABLE t (id integer PRIMARY KEY AUTOINCREMENT, ${COLUMNS}); CREATE INDEX t_event ON t (event_id)`,
  'rowid id + event index': `CREATE TABLE t (id integer PRIMARY KEY, ${COLUMNS}); CREATE INDEX t_event ON t (event_id)`,
};

const batches = (): string[][] => {
  const ids = Array.from({ length: N }, () => timeOrderedUuid());
  const out: string[][] = [];
  for (let i = 0; i < N; i += BATCH) out.push(ids.slice(i, i + BATCH));
  return out;
};

const PG_ROWS = `FROM json_to_recordset($1::json) AS (id text, started bigint, dur int, http int, err text, ok int)`;

/** The backend's CPU per row (µs) inserting N rows into the shape. */
async function pgShape(c: pg.Client, pid: number, shape: string): Promise<number> {
  await c.query('DROP TABLE IF EXISTS t');
  await c.query(PG_SHAPES[shape]!);
  const work = batches().map((ids) => JSON.stringify(ids.map((id) => ({ id, started: 1, dur: 3, http: 200, ok: 1 }))));
  const text =
    shape === 'decode'
      ? `SELECT count(*) ${PG_ROWS}`
      : `INSERT INTO t (event_id, attempt, started_at, duration_ms, http_status, error, ok, manual)
          SELECT id, 1, started, dur, http, err, ok, 0 ${PG_ROWS}`;
  const t0 = cpuMicros(pid)!;
  for (const rows of work) await c.query(text, [rows]);
  return (cpuMicros(pid)! - t0) / N;
}

/** This process's CPU per row (µs) inserting N rows into the shape. */
function sqliteShape(dir: string, shape: string): number {
  const file = path.join(dir, 'attempts.sqlite');
  fs.rmSync(file, { force: true });
  const db = new SQLite(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec(SQLITE_SHAPES[shape]!);
  const insert = db.prepare(`INSERT INTO t (event_id, attempt, started_at, duration_ms, http_status, error, ok, manual)
    VALUES (?, 1, 1, 3, 200, NULL, 1, 0)`);
  const write = db.transaction((ids: string[]) => {
    for (const id of ids) insert.run(id);
  });
  const work = batches();
  const t0 = process.cpuUsage();
  for (const ids of work) write.immediate(ids);
  const used = process.cpuUsage(t0);
  db.close();
  return (used.user + used.system) / N;
}

const results: Record<string, number[]> = {};
const url = await createPgDatabase();
const c = new pg.Client({ connectionString: url });
await c.connect();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mj-attempt-rows-'));
try {
  const pid = (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  for (let r = 0; r < ROUNDS; r++) {
    for (const shape of Object.keys(PG_SHAPES)) (results[`pg: ${shape}`] ??= []).push(await pgShape(c, pid, shape));
    for (const shape of Object.keys(SQLITE_SHAPES)) (results[`sqlite: ${shape}`] ??= []).push(sqliteShape(dir, shape));
  }
  console.log(`${N} rows in batches of ${BATCH}, CPU per row (µs), ${ROUNDS} rounds alternated:`);
  for (const [k, v] of Object.entries(results))
    console.log(`  ${k.padEnd(56)} ${v.map((x) => x.toFixed(2)).join('  ')}`);
} finally {
  await c.end();
  await dropPgDatabase(url);
  fs.rmSync(dir, { recursive: true, force: true });
}
