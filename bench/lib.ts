/**
 * Shared helpers for the benchmark: child processes (the service, the bare Fastify ceiling, the
 * receiver, pg-boss workers), fresh databases, autocannon runs, statistics and the result rows.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { createServer, type AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import pg from 'pg';
import { Pool } from 'undici';
import type { Insertable, Kysely } from 'kysely';
import { openStore } from '../src/store/db.js';
import type { Database, WebhookEventsTable } from '../src/store/schema.js';
import { createKey } from '../src/store/keys.js';
import type { ScheduledAttempt } from '../src/store/webhooks.js';
import { SecretKeys, signedDeliveryHeaders } from '../src/webhooks/sign.js';

/** Writes webhook outbox rows straight into the table, 500 a statement (the dispatch benches' backlogs). */
export async function insertWebhookEvents(db: Kysely<Database>, rows: Insertable<WebhookEventsTable>[]): Promise<void> {
  for (let i = 0; i < rows.length; i += 500)
    await db
      .insertInto('webhook_events')
      .values(rows.slice(i, i + 500))
      .execute();
}

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const RESULTS_DIR = path.join(ROOT, 'bench/results');
export const PROFILE_DIR = path.join(RESULTS_DIR, 'profiles');
/** Children's stdout (service logs); wiped at the start of each run. */
export const LOG_DIR = path.join(os.tmpdir(), 'mj-bench-logs');
export const PG_ADMIN_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

const num = (v: string | undefined, d: number) =>
  v !== undefined && v !== '' && Number.isFinite(Number(v)) ? Number(v) : d;

/** Knobs (env): sized so `npm run bench` stays well under 15 minutes on 2 cores. */
export const settings = {
  rounds: num(process.env.BENCH_ROUNDS, 3),
  /** Seconds per autocannon run (headline runs: status, isolation). */
  duration: num(process.env.BENCH_DURATION, 10),
  /** Seconds per secondary autocannon run (submit variants, status with info logs): time budget. */
  shortDuration: num(process.env.BENCH_SHORT_DURATION, 5),
  connections: num(process.env.BENCH_CONNECTIONS, 64),
  /** Autocannon connections of the submit scenario (a burst of submits from one client's workers). */
  submitConnections: num(process.env.BENCH_SUBMIT_CONNECTIONS, 16),
  queueJobs: num(process.env.BENCH_QUEUE_JOBS, 10_000),
  /** Concurrent submits (HTTP for media-jobs, boss.send for pg-boss) in the queue scenario. */
  submitConcurrency: num(process.env.BENCH_SUBMIT_CONCURRENCY, 32),
  // 10,000: at 1,500 a 10 ms CPU tick is 6.7 µs per delivery and each burst's fixed cost weighs heavily.
  webhookEvents: num(process.env.BENCH_WEBHOOK_EVENTS, 10_000),
  /** Comma-separated scenario names to run (default: all). */
  only: (process.env.BENCH_ONLY ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean),
  /** Comma-separated scenario names (or `all`) whose service children run under --cpu-prof. */
  profile: (process.env.BENCH_PROFILE ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean),
};

// ---------------------------------------------------------------- results

/** One line of the results table. Numbers are medians over the rounds unless said otherwise. */
export interface Row {
  scenario: string;
  case: string;
  value: string;
  reference?: string;
  target?: string;
  /** undefined: no target. */
  ok?: boolean;
  /** A secondary row: in latest.md, not in summary.md. */
  detail?: boolean;
}

/** Raw per-round numbers, kept in latest.json for whoever wants to look closer. */
export const raw: Record<string, unknown> = {};
/** Notes printed under the table (anomalies: non-2xx answers, timeouts…). */
export const notes: string[] = [];

export function note(text: string): void {
  notes.push(text);
  log(`  note: ${text}`);
}

export function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

// ---------------------------------------------------------------- statistics

export function median(xs: number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Nearest-rank quantile, q in [0, 1]. */
export function quantile(xs: ArrayLike<number>, q: number): number {
  const s = Float64Array.from(xs).sort();
  if (s.length === 0) return NaN;
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!;
}

export const fmt = {
  int: (x: number) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : 'n/a'),
  ms: (x: number) =>
    !Number.isFinite(x) ? 'n/a' : x < 10 ? `${x.toFixed(1)} ms` : `${Math.round(x).toLocaleString('en-US')} ms`,
  pct: (x: number) => (Number.isFinite(x) ? `${Math.round(x * 100)}%` : 'n/a'),
};

// ---------------------------------------------------------------- processes and memory

let currentScenario = 'setup';
export function setScenario(name: string): void {
  currentScenario = name;
}

/** Peak RSS (VmHWM) of every child, read just before it was stopped. */
export const memory: Array<{ scenario: string; name: string; peakMb: number }> = [];
const live = new Set<Child>();

export interface Child {
  name: string;
  proc: ChildProcess;
  pid: number;
  output(): string;
  /** Reads VmHWM, then SIGTERM (SIGKILL after a grace) and waits for the exit. */
  stop(): Promise<void>;
}

export function readPeakRssMb(pid: number): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/**
 * Starts `node --import tsx bench/<script>` and waits for the line `BENCH_READY` on its stderr.
 * Its stdout (the service's JSON logs) goes to a file, as in production, so reading it costs the
 * load generator nothing. `track`: record the child's peak RSS when it stops.
 */
export async function spawnChild(
  name: string,
  script: string,
  args: string[],
  env: Record<string, string>,
  opts: { track?: boolean; profile?: boolean; timeoutMs?: number } = {},
): Promise<Child> {
  const nodeArgs = ['--import', 'tsx'];
  if (opts.profile) {
    // One directory per child: every thread (tsx's loader thread included) writes its own file.
    nodeArgs.push('--cpu-prof', `--cpu-prof-dir=${path.join(PROFILE_DIR, `${currentScenario}-${name}-${Date.now()}`)}`);
  }
  fs.mkdirSync(LOG_DIR, { recursive: true });
  const logFile = path.join(LOG_DIR, `${currentScenario}-${name}-${Date.now()}.log`);
  const stdout = fs.openSync(logFile, 'w');
  const proc = spawn(process.execPath, [...nodeArgs, path.join(ROOT, 'bench', script), ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', stdout, 'pipe'],
  });
  fs.closeSync(stdout);
  let err = '';
  proc.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
    if (err.length > 100_000) err = err.slice(-50_000);
  });
  const output = () => {
    let log = '';
    try {
      log = fs.readFileSync(logFile, 'utf8').slice(-3000);
    } catch {
      /* gone */
    }
    return `${err.slice(-3000)}\n${log}`;
  };
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const scenario = currentScenario;
  const child: Child = {
    name,
    proc,
    pid: proc.pid!,
    output,
    async stop() {
      if (proc.exitCode !== null || proc.signalCode !== null) {
        live.delete(child);
        return;
      }
      if (opts.track) memory.push({ scenario, name, peakMb: readPeakRssMb(proc.pid!) });
      proc.kill('SIGTERM');
      const killer = setTimeout(() => proc.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(killer);
      live.delete(child);
    },
  };
  live.add(child);
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  while (!err.includes('BENCH_READY')) {
    if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`${name} exited early:\n${output()}`);
    if (Date.now() > deadline) {
      await child.stop();
      throw new Error(`${name} did not start in time:\n${output()}`);
    }
    await sleep(25);
  }
  return child;
}

/** Last resort on exit: never leave children behind. */
export function killAll(): void {
  for (const c of live) c.proc.kill('SIGKILL');
}

export async function stopAll(children: Array<Child | undefined>): Promise<void> {
  await Promise.all(children.map(async (c) => c?.stop()));
}

// ---------------------------------------------------------------- the service under benchmark

export type Db = 'sqlite' | 'postgres';

export interface BenchStore {
  db: Db;
  url: string;
  dataDir: string;
  key: string;
  dispose(): Promise<void>;
}

/** A fresh database (SQLite file in a temp dir, or CREATE DATABASE), migrated, with one API key. */
export async function freshStore(db: Db): Promise<BenchStore> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mj-bench-'));
  const url = db === 'sqlite' ? `sqlite:${path.join(dataDir, 'media-jobs.sqlite')}` : await createPgDatabase();
  const store = await openStore(url);
  const { key } = await createKey(store.db, 'bench', Date.now());
  await store.close();
  return {
    db,
    url,
    dataDir,
    key,
    async dispose() {
      if (db === 'postgres') await dropPgDatabase(url);
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Databases this run created and has not dropped yet (dropped on an interrupted run too). */
const pgDatabases = new Set<string>();

export async function createPgDatabase(): Promise<string> {
  const name = `mj_bench_${randomBytes(4).toString('hex')}`;
  await adminQuery(`CREATE DATABASE ${name}`);
  pgDatabases.add(name);
  const url = new URL(PG_ADMIN_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

export async function dropPgDatabase(url: string): Promise<void> {
  const name = new URL(url).pathname.slice(1);
  if (!/^mj_bench_[0-9a-f]+$/.test(name)) throw new Error(`refusing to drop ${name}`);
  await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  pgDatabases.delete(name);
}

/** Drops what an interrupted run left behind. */
export async function dropLeftoverDatabases(): Promise<void> {
  for (const name of [...pgDatabases]) await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
  pgDatabases.clear();
}

async function adminQuery(text: string, values: unknown[] = []): Promise<pg.QueryResult> {
  const c = new pg.Client({ connectionString: PG_ADMIN_URL });
  await c.connect();
  try {
    return await c.query(text, values);
  } finally {
    await c.end();
  }
}

export interface PgStats {
  /** Committed transactions (every autocommit statement counts as one). */
  commits: number;
  rowsInserted: number;
  rowsUpdated: number;
  rowsFetched: number;
}

/** Work PostgreSQL did for one database (pg_stat_database), read after its clients have gone. */
export async function pgDatabaseStats(url: string): Promise<PgStats> {
  const name = new URL(url).pathname.slice(1);
  await sleep(700); // backends flush their counters when they exit
  const r = await adminQuery(
    'SELECT xact_commit AS c, tup_inserted AS i, tup_updated AS u, tup_fetched AS f FROM pg_stat_database WHERE datname = $1',
    [name],
  );
  const row = r.rows[0] as { c: string; i: string; u: string; f: string };
  return {
    commits: Number(row.c),
    rowsInserted: Number(row.i),
    rowsUpdated: Number(row.u),
    rowsFetched: Number(row.f),
  };
}

export interface Service extends Child {
  base: string;
}

export interface ServiceOptions {
  role?: 'api' | 'worker' | 'all';
  env?: Record<string, string>;
  name?: string;
}

/** Environment every service under benchmark gets (overridable per scenario). */
export function serviceEnv(store: BenchStore, extra: Record<string, string> = {}): Record<string, string> {
  return {
    HOST: '127.0.0.1',
    DATA_DIR: store.dataDir,
    DATABASE_URL: store.url,
    LOG_LEVEL: 'warn',
    RATE_LIMIT_READ: '0',
    RATE_LIMIT_SUBMIT: '0',
    MEDIA_ALLOW_PRIVATE_NETWORKS: 'true',
    SHUTDOWN_GRACE: '2s',
    // These scenarios run no face or video job: loading their models would only add CPU to the run.
    WORKER_WARMUP: 'false',
    ...extra,
  };
}

/** Spawns bench/service.ts (createApp with the default types plus `bench-noop`) as a child. */
export async function startService(store: BenchStore, opts: ServiceOptions = {}): Promise<Service> {
  const port = await freePort();
  const role = opts.role ?? 'all';
  const env = serviceEnv(store, { PORT: String(port), PUBLIC_BASE_URL: `http://127.0.0.1:${port}`, ...opts.env });
  const profile = settings.profile.includes('all') || settings.profile.includes(currentScenario);
  const child = await spawnChild(opts.name ?? `service-${role}`, 'service.ts', ['--role', role], env, {
    track: true,
    profile,
  });
  return { ...child, base: `http://127.0.0.1:${port}` };
}

// ---------------------------------------------------------------- HTTP

export const NOOP_BODY = JSON.stringify({ job_type: 'bench-noop', model: 'v1', input: {} });
export const NOOP_PATH = '/api/v1/jobs/submit/bench-noop';

export function authHeaders(key: string, json = false): Record<string, string> {
  return json
    ? { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
    : { authorization: `Bearer ${key}` };
}

/** A tiny JSON client over an undici Pool (keep-alive; `connections` sockets). */
export function httpClient(base: string, key: string, connections = 32) {
  const pool = new Pool(base, { connections, pipelining: 1 });
  return {
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- the caller names the response shape it expects
    async call<T = any>(
      method: 'GET' | 'POST',
      p: string,
      body?: string,
      headers: Record<string, string> = {},
    ): Promise<{ status: number; json: T }> {
      const res = await pool.request({
        method,
        path: p,
        headers: { ...authHeaders(key, body !== undefined), ...headers },
        body,
      });
      const text = await res.body.text();
      let json: any;
      try {
        json = JSON.parse(text);
      } catch {
        json = text;
      }
      return { status: res.statusCode, json: json as T };
    },
    close: () => pool.close(),
  };
}

/** Each secret's HMAC keys, made once (as the dispatcher's sender keeps them). */
const rawKeys = new Map<string, SecretKeys>();

/**
 * One raw delivery of a webhook (the reference the dispatcher is measured against), doing per
 * delivery what the dispatcher's sender does (src/webhooks/send.ts): the stored body made bytes
 * once, signed by the same signer with keys made once per secret and a fresh timestamp, POSTed as
 * those bytes through `pool`, the answer read to its end; returns the HTTP status.
 */
export async function rawDelivery(pool: Pool, secret: string, eventId: string, body: string): Promise<number> {
  let keys = rawKeys.get(secret);
  if (!keys) rawKeys.set(secret, (keys = new SecretKeys(secret)));
  const bytes = Buffer.from(body, 'utf8');
  const headers = signedDeliveryHeaders(eventId, Math.floor(Date.now() / 1000), bytes, keys);
  const res = await pool.request({
    method: 'POST',
    path: '/hook',
    headers,
    body: bytes,
    headersTimeout: 10_000,
    bodyTimeout: 10_000,
  });
  await res.body.dump();
  return res.statusCode;
}

/** Runs `count` tasks with at most `concurrency` in flight. */
export async function inParallel(
  count: number,
  concurrency: number,
  task: (i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next < count) await task(next++);
    }),
  );
}

export async function waitUntil(
  what: string,
  fn: () => Promise<boolean> | boolean,
  timeoutMs = 120_000,
  everyMs = 100,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

/**
 * The status scenario's subject: one completed no-op job, submitted through `base` and polled until
 * done. Returns its status path and the envelope's text (bare Fastify answers with the same bytes).
 */
export async function completedNoopStatus(base: string, key: string): Promise<{ path: string; text: string }> {
  const c = httpClient(base, key, 1);
  const uuid = (await c.call('POST', NOOP_PATH, NOOP_BODY)).json.data.uuid as string;
  const path = `/api/v1/jobs/${uuid}/status`;
  let text = '';
  await waitUntil('the job to complete', async () => {
    const r = await c.call('GET', path);
    text = JSON.stringify(r.json);
    return r.json.data?.status === 'completed';
  });
  await c.close();
  return { path, text };
}

// ---------------------------------------------------------------- autocannon

export interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  total: number;
  non2xx: number;
  errors: number;
  /** CPU time (user + system, all threads) of the process `cpuOf` named, per request, in µs. */
  cpuUs?: number;
}

export interface LoadOptions {
  url: string;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  /** Fresh headers per request (e.g. a unique Idempotency-Key). */
  perRequestHeaders?: () => Record<string, string>;
  connections?: number;
  duration?: number;
  /** Requests per second across all connections (open model); unset: as fast as possible. */
  overallRate?: number;
  /** A process (the server under load) whose CPU time per request to report. */
  cpuOf?: number;
}

/**
 * CPU µs the PostgreSQL backends serving `admin`'s database have used so far (a server on this
 * machine: /proc), `admin`'s own backend left out; and how many backends that was.
 */
export async function serverBackendsCpu(admin: pg.Client): Promise<{ us: number; backends: number }> {
  const { rows } = await admin.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'
      AND pid <> pg_backend_pid()`,
  );
  let us = 0;
  for (const { pid } of rows) us += cpuMicros(pid) ?? 0;
  return { us, backends: rows.length };
}

/** A delivered attempt of event `eventId`, as the dispatcher records one (the dispatch benches). */
export const deliveredAttempt = (eventId: string, now: number): ScheduledAttempt => ({
  eventId,
  claimedAttempts: 0,
  attempt: { startedAt: now, durationMs: 3, httpStatus: 200, error: null, ok: true },
  state: 'delivered',
  nextAttemptAt: null,
  now,
});

/** CPU time of a process so far (all its threads), in µs, from /proc (undefined elsewhere). */
export function cpuMicros(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime (fields 14 and 15 of the file), in clock ticks of 10 ms on Linux.
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return undefined;
  }
}

/** One autocannon run in this process (the service is always another process). */
export async function load(o: LoadOptions): Promise<LoadResult> {
  const base = { method: o.method ?? 'GET', headers: o.headers ?? {}, body: o.body };
  const perRequest = o.perRequestHeaders;
  const cpu0 = o.cpuOf === undefined ? undefined : cpuMicros(o.cpuOf);
  const r = await autocannon({
    url: o.url,
    connections: o.connections ?? settings.connections,
    duration: o.duration ?? settings.duration,
    ...(o.overallRate ? { overallRate: o.overallRate } : {}),
    requests: [
      perRequest
        ? {
            ...base,
            setupRequest: (req: Record<string, any>) => ({ ...req, headers: { ...base.headers, ...perRequest() } }),
          }
        : base,
    ],
  });
  return {
    rps: r.requests.total / r.duration,
    p50: r.latency.p50,
    p99: r.latency.p99,
    total: r.requests.total,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
    ...(cpu0 === undefined ? {} : { cpuUs: (cpuMicros(o.cpuOf!)! - cpu0) / Math.max(1, r.requests.total) }),
  };
}

export function describeLoad(r: LoadResult): string {
  const cpu = r.cpuUs === undefined ? '' : `, ${Math.round(r.cpuUs)} µs CPU/req`;
  return `${fmt.int(r.rps)} req/s, p50 ${fmt.ms(r.p50)}, p99 ${fmt.ms(r.p99)}${cpu}`;
}

/** Flags a run that did not answer 2xx throughout (its numbers would be meaningless). */
export function checkLoad(label: string, r: LoadResult): void {
  if (r.non2xx > 0 || r.errors > 0)
    note(`${label}: ${r.non2xx} non-2xx answers and ${r.errors} errors/timeouts out of ${r.total}`);
}
