/**
 * Scenario: the queue under a backlog. For each database and each backlog size (BENCH_BACKLOGS,
 * default 0, 100,000 and 1,000,000 queued jobs of one owner, inserted in bulk), it measures:
 *   claim p50     one claim of one job (lifecycle's claim statement), timed in this process;
 *   status        GET status of the LAST queued job by 32 connections for BENCH_SHORT_DURATION s
 *                 (an API-only process: no workers competing for the CPU); rps and p99;
 *   jobs/s        one `all` process with WORKER_SLOTS slots drains no-op jobs: the rate between
 *                 the 200th and the (200 + MEASURED)th finished job, from the jobs_finished counter;
 *   other owner   while that drain runs, a second owner submits one job: created → started.
 * "0 queued" has MEASURED + 200 jobs, the fewest that can be measured; the bigger backlogs add theirs
 * in front of them in the same owner's queue.
 */
import { MOVES } from '../../src/jobs/moves.js';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import SQLite from 'better-sqlite3';
import { openStore } from '../../src/store/db.js';
import { claimJobs } from '../../src/store/jobs.js';
import { createKey } from '../../src/store/keys.js';
import {
  fmt,
  freshStore,
  load,
  log,
  median,
  note,
  raw,
  settings,
  setScenario,
  startService,
  stopAll,
  type BenchStore,
  type Db,
  type Row,
  type Service,
} from '../lib.js';

const WORKER_SLOTS = 4;
const MEASURED = 2_000;
const WARMUP = 200;
const backlogs = (process.env.BENCH_BACKLOGS ?? '0,100000,1000000').split(',').map(Number);
const databases = (process.env.BENCH_BACKLOG_DBS ?? 'sqlite,postgres').split(',') as Db[];

/** Bulk-inserts `n` queued no-op jobs of `owner` with consecutive virtual times (as n sequential submits get). */
/**
 * `n` queued jobs of one owner, inserted in bulk. With `deadlines`, every job has a deadline an
 * hour ahead (none due): the deadline sweep's worst case, a partial index holding every row.
 */
export async function fillBacklog(
  store: BenchStore,
  n: number,
  owner: string,
  opts: { deadlines?: boolean } = {},
): Promise<string> {
  const deadline = opts.deadlines ? 'created_at + 3600000' : 'NULL';
  const t0 = Date.now() - 60_000;
  const seed = Math.floor(Math.random() * 0xffffffff);
  const uuidOf = (i: number) =>
    `${seed.toString(16).padStart(8, '0')}-0000-4000-8000-${i.toString(16).padStart(12, '0')}`;
  const chunk = 100_000;
  if (store.db === 'sqlite') {
    const db = new SQLite(store.url.slice('sqlite:'.length));
    db.pragma('journal_mode = WAL');
    const insert = db.prepare(`WITH RECURSIVE s(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM s WHERE i < ?)
      INSERT INTO jobs (uuid, owner, job_type, model, input, status, status_detail, attempts, vtime, created_at, updated_at, rank, deadline)
      SELECT uuid, owner, job_type, model, input, status, status_detail, attempts, vtime, created_at, updated_at, created_at, ${deadline}
      FROM (SELECT printf('%08x-0000-4000-8000-%012x', ?, i) AS uuid, ? AS owner, 'bench-noop' AS job_type, 'v1' AS model, '{}' AS input,
        'queued' AS status, 'waiting for a worker' AS status_detail, 0 AS attempts, i AS vtime, ? + i / 1000 AS created_at, ? AS updated_at FROM s)`);
    for (let from = 0; from < n; from += chunk) insert.run(from, Math.min(n, from + chunk) - 1, seed, owner, t0, t0);
    db.pragma('wal_checkpoint(TRUNCATE)');
    db.exec('ANALYZE');
    db.close();
  } else {
    const c = new pg.Client({ connectionString: store.url });
    await c.connect();
    for (let from = 0; from < n; from += chunk) {
      await c.query(
        `INSERT INTO jobs (uuid, owner, job_type, model, input, status, status_detail, attempts, vtime, created_at, updated_at, rank, deadline)
         SELECT uuid, owner, job_type, model, input, status, status_detail, attempts, vtime, created_at, updated_at, created_at, ${deadline}
         FROM (SELECT lpad(to_hex($1::bigint), 8, '0') || '-0000-4000-8000-' || lpad(to_hex(i), 12, '0') AS uuid, $2::text AS owner,
                'bench-noop' AS job_type, 'v1' AS model, '{}' AS input, 'queued' AS status,
                'waiting for a worker' AS status_detail, 0 AS attempts, i AS vtime, $3::bigint + i / 1000 AS created_at, $3::bigint AS updated_at
               FROM generate_series($4::bigint, $5::bigint) AS i) AS s`,
        [seed, owner, t0, from, Math.min(n, from + chunk) - 1],
      );
    }
    await c.query('VACUUM ANALYZE jobs');
    await c.end();
  }
  return uuidOf(n - 1);
}

interface Case {
  db: Db;
  backlog: number;
  claimP50: number;
  statusRps: number;
  statusP99: number;
  jobsPerSecond: number;
  otherWaitMs: number;
  scrapeMs: number;
}

async function claimP50(store: BenchStore): Promise<number> {
  const s = await openStore(store.url, { migrate: false });
  const times: number[] = [];
  try {
    for (let i = 0; i < 100; i++) {
      const t = performance.now();
      await claimJobs(s.db, s.dialect, {
        move: MOVES.claim,
        leaseOwner: `bench/${i}`,
        leaseMs: 60_000,
        now: Date.now(),
        jobTypes: ['bench-noop'],
        limit: 1,
      });
      times.push(performance.now() - t);
    }
    // Put them back, so every case drains the same jobs.
    await s.db
      .updateTable('jobs')
      .set({ status: 'queued', lease_owner: null, lease_expires_at: null, attempts: 0 })
      .where('status', '=', 'processing')
      .execute();
  } finally {
    await s.close();
  }
  return median(times);
}

async function finishedCount(svc: Service): Promise<{ n: number; ms: number }> {
  const t = performance.now();
  const text = await (await fetch(`${svc.base}/metrics`)).text();
  const ms = performance.now() - t;
  let n = 0;
  for (const m of text.matchAll(/^media_jobs_jobs_finished_total\{[^}]*\} (\d+)/gm)) n += Number(m[1]);
  return { n, ms };
}

async function runCase(db: Db, backlog: number): Promise<Case> {
  const store = await freshStore(db);
  const children: Service[] = [];
  try {
    const t0 = Date.now();
    const last = await fillBacklog(store, backlog + MEASURED + WARMUP, 'bench');
    log(`  ${db}, ${fmt.int(backlog)} queued: filled in ${fmt.ms(Date.now() - t0)}`);
    const claim = await claimP50(store);

    const api = await startService(store, { role: 'api', env: { WORKER_CONCURRENCY: '0' }, name: `api-${db}` });
    children.push(api);
    const status = await load({
      url: `${api.base}/api/v1/jobs/${last}/status`,
      headers: { authorization: `Bearer ${store.key}` },
      connections: 32,
      duration: settings.shortDuration,
    });
    await stopAll([api]);
    children.length = 0;

    // A second owner, with nothing queued, submits one job while the first owner's backlog drains.
    const s = await openStore(store.url, { migrate: false });
    const { key: otherKey } = await createKey(s.db, 'other', Date.now());
    await s.close();
    const svc = await startService(store, {
      role: 'all',
      env: { WORKER_CONCURRENCY: String(WORKER_SLOTS) },
      name: `all-${db}`,
    });
    children.push(svc);
    const timeline: Array<{ t: number; n: number }> = [];
    const scrapes: number[] = [];
    let other: string | undefined;
    const deadline = Date.now() + 120_000;
    while (Date.now() < deadline) {
      const { n, ms } = await finishedCount(svc);
      scrapes.push(ms);
      timeline.push({ t: performance.now(), n });
      if (n >= WARMUP && other === undefined) {
        const r = await fetch(`${svc.base}/api/v1/jobs/submit/bench-noop`, {
          method: 'POST',
          headers: { authorization: `Bearer ${otherKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ job_type: 'bench-noop', model: 'v1', input: {} }),
        });
        other = ((await r.json()) as { data: { uuid: string } }).data.uuid;
      }
      if (n >= WARMUP + MEASURED) break;
      await sleep(100);
    }
    const at = (count: number) => timeline.find((p) => p.n >= count);
    const a = at(WARMUP);
    const b = at(WARMUP + MEASURED);
    const jobsPerSecond = a && b ? ((b.n - a.n) / (b.t - a.t)) * 1000 : NaN;
    let otherWaitMs = NaN;
    if (other) {
      for (let i = 0; i < 100; i++) {
        const r = await fetch(`${svc.base}/api/v1/jobs/${other}/status`, {
          headers: { authorization: `Bearer ${otherKey}` },
        });
        const job = ((await r.json()) as { data: { created_at: string; started_at: string | null } }).data;
        if (job.started_at) {
          otherWaitMs = Date.parse(job.started_at) - Date.parse(job.created_at);
          break;
        }
        await sleep(100);
      }
    }
    const result: Case = {
      db,
      backlog,
      claimP50: claim,
      statusRps: status.rps,
      statusP99: status.p99,
      jobsPerSecond,
      otherWaitMs,
      scrapeMs: median(scrapes),
    };
    log(
      `  ${db}, ${fmt.int(backlog)} queued: claim p50 ${fmt.ms(claim)}, status ${fmt.int(status.rps)} rps p99 ${fmt.ms(status.p99)}, ` +
        `${fmt.int(jobsPerSecond)} jobs/s, other owner waited ${fmt.ms(otherWaitMs)}, /metrics ${fmt.ms(result.scrapeMs)}`,
    );
    return result;
  } finally {
    await stopAll(children);
    await store.dispose();
  }
}

export async function backlogScenario(): Promise<Row[]> {
  setScenario('backlog');
  const rows: Row[] = [];
  const cases: Case[] = [];
  for (const db of databases) {
    const base: Case[] = [];
    for (const backlog of backlogs) {
      const c = await runCase(db, backlog);
      cases.push(c);
      base.push(c);
      const small = base[0]!;
      const ratio = (x: number, y: number) => x / y;
      const isBig = backlog >= 1_000_000;
      const jobsRatio = ratio(c.jobsPerSecond, small.jobsPerSecond);
      const statusRatio = ratio(c.statusRps, small.statusRps);
      rows.push({
        scenario: 'backlog',
        case: `${db === 'sqlite' ? 'SQLite' : 'PostgreSQL'}, ${fmt.int(backlog)} queued (one owner), ${WORKER_SLOTS} slots`,
        value:
          `claim p50 ${fmt.ms(c.claimP50)}; ${fmt.int(c.jobsPerSecond)} jobs/s; status ${fmt.int(c.statusRps)} rps, p99 ${fmt.ms(c.statusP99)}; ` +
          `other owner's job started after ${fmt.ms(c.otherWaitMs)}`,
        reference:
          c === small
            ? 'the small-backlog case'
            : `vs ${fmt.int(small.backlog)} queued: jobs/s ${fmt.pct(jobsRatio)}, status ${fmt.pct(statusRatio)}`,
        target: isBig ? '≥ 80% jobs/s and status; other owner < 2 s' : c === small ? '' : '(info)',
        ok: isBig ? jobsRatio >= 0.8 && statusRatio >= 0.8 && c.otherWaitMs < 2000 : undefined,
      });
      rows.push({
        scenario: 'backlog',
        case: `${db === 'sqlite' ? 'SQLite' : 'PostgreSQL'}, ${fmt.int(backlog)} queued: /metrics scrape (queue-depth gauge)`,
        value: `p50 ${fmt.ms(c.scrapeMs)}`,
        detail: true,
      });
    }
  }
  raw.backlog = cases;
  if (cases.some((c) => !Number.isFinite(c.jobsPerSecond)))
    note('backlog: a drain did not reach its measured count within 120 s');
  return rows;
}
