/**
 * Scenario 3: the queue on PostgreSQL, media-jobs against pg-boss, a fresh database per run.
 *
 * media-jobs: one API process takes `bench-noop` submits over HTTP; 1 or 4 worker processes
 * (`serve --role worker`, WORKER_CONCURRENCY=8 each) run them. pg-boss: this process sends
 * (boss.send) and 1 or 4 worker processes (bench/pgboss-worker.ts) work them with a no-op handler.
 * Each run has two phases:
 *   paced: PACED_JOBS jobs at PACED_RATE/s on an idle queue: pickup latency without a backlog;
 *   bulk:  BENCH_QUEUE_JOBS (10,000) jobs by BENCH_SUBMIT_CONCURRENCY (32) concurrent submits:
 *          end-to-end jobs/s from the first submit to the last terminal state, pickup p50/p99.
 * Times come from the database (created/started/finished per job), so both systems are measured
 * the same way. pg_stat_database gives the PostgreSQL transactions each system spent per job.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import PgBoss from 'pg-boss';
import {
  createPgDatabase,
  dropPgDatabase,
  fmt,
  freshStore,
  httpClient,
  inParallel,
  log,
  median,
  note,
  NOOP_BODY,
  NOOP_PATH,
  pgDatabaseStats,
  quantile,
  raw,
  settings,
  setScenario,
  spawnChild,
  startService,
  stopAll,
  type Child,
  type Row,
} from '../lib.js';

const WORKER_SLOTS = 8;
/** pg-boss: jobs fetched per poll by each worker process (its throughput knob; see bench/README.md). */
export const PGBOSS_BATCH = Number(process.env.BENCH_PGBOSS_BATCH ?? 100);
const PACED_JOBS = 100;
const PACED_RATE = 50;
/** A bulk phase that has not finished by then is cut short and reported as such. */
const RUN_TIMEOUT_MS = Number(process.env.BENCH_QUEUE_TIMEOUT ?? 150) * 1000;
/** No new round starts when it would likely end past this (the whole bench must stay < 15 min). */
const SCENARIO_BUDGET_MS = Number(process.env.BENCH_QUEUE_BUDGET ?? 480) * 1000;

type Times = Array<{ c: number; s: number; f: number }>;

/** What a run needs from a system under test. */
interface System {
  submit(): Promise<boolean>;
  /** Jobs in a terminal state so far. */
  finished(): Promise<number>;
  /** created/started/finished (ms) of the jobs created at or after `from` (ms since epoch). */
  times(from: number): Promise<Times>;
  /** Stops the processes; returns the PostgreSQL transactions spent in total. */
  close(): Promise<number>;
}

interface QueueRun {
  jobs: number;
  finished: number;
  timedOut: boolean;
  submitSeconds: number;
  endToEndSeconds: number;
  jobsPerSecond: number;
  pickupP50: number;
  pickupP99: number;
  pacedPickupP50: number;
  pacedPickupP99: number;
  commitsPerJob: number;
}

/** Runs `f` the first time only (closing twice is not always safe). */
function once<T>(f: () => Promise<T>): () => Promise<T> {
  let p: Promise<T> | undefined;
  return () => (p ??= f());
}

async function startMediaJobs(workers: number): Promise<System> {
  const store = await freshStore('postgres');
  const children: Child[] = [];
  const db = new pg.Client({ connectionString: store.url });
  db.on('error', () => {}); // e.g. the database dropped under it on an interrupted run
  const closeDb = once(() => db.end());
  try {
    const api = await startService(store, { role: 'api', env: { WORKER_CONCURRENCY: '0' }, name: 'api' });
    children.push(api);
    const ws = await Promise.all(
      Array.from({ length: workers }, (_, i) =>
        startService(store, {
          role: 'worker',
          env: { WORKER_CONCURRENCY: String(WORKER_SLOTS) },
          name: `worker-${i + 1}`,
        }),
      ),
    );
    children.push(...ws);
    await db.connect();
    const c = httpClient(api.base, store.key, settings.submitConcurrency);
    return {
      submit: async () => (await c.call('POST', NOOP_PATH, NOOP_BODY)).status === 200,
      finished: async () =>
        Number(
          (await db.query(`SELECT count(*) AS n FROM jobs WHERE status IN ('completed','failed','cancelled')`)).rows[0]
            .n,
        ),
      times: async (from) =>
        (
          await db.query<{ c: string; s: string | null; f: string | null }>(
            'SELECT created_at AS c, started_at AS s, finished_at AS f FROM jobs WHERE created_at >= $1',
            [from],
          )
        ).rows.map((r) => ({ c: Number(r.c), s: Number(r.s ?? NaN), f: Number(r.f ?? NaN) })),
      close: once(async () => {
        try {
          await c.close();
          await closeDb();
          await stopAll(children);
          return (await pgDatabaseStats(store.url)).commits;
        } finally {
          await store.dispose();
        }
      }),
    };
  } catch (err) {
    await closeDb().catch(() => {});
    await stopAll(children);
    await store.dispose();
    throw err;
  }
}

async function startPgBoss(workers: number): Promise<System> {
  const url = await createPgDatabase();
  const children: Child[] = [];
  const boss = new PgBoss({ connectionString: url, max: 10, supervise: false, schedule: false });
  boss.on('error', (err: Error) => note(`pg-boss (sender): ${err.message}`));
  const db = new pg.Client({ connectionString: url });
  db.on('error', () => {});
  const closeDb = once(() => db.end());
  const stopBoss = once(() => boss.stop({ graceful: false, wait: true }));
  try {
    await boss.start();
    await boss.createQueue('bench');
    const ws = await Promise.all(
      Array.from({ length: workers }, (_, i) =>
        spawnChild(
          `pgboss-worker-${i + 1}`,
          'pgboss-worker.ts',
          [],
          { DATABASE_URL: url, PGBOSS_BATCH: String(PGBOSS_BATCH), PGBOSS_LOOPS: '1' },
          { track: true },
        ),
      ),
    );
    children.push(...ws);
    await db.connect();
    return {
      submit: async () => (await boss.send('bench', {})) !== null,
      finished: async () =>
        Number(
          (await db.query(`SELECT count(*) AS n FROM pgboss.job WHERE name = 'bench' AND state = 'completed'`)).rows[0]
            .n,
        ),
      times: async (from) =>
        // extract() answers numeric, which pg returns as a string.
        (
          await db.query<{ c: string; s: string | null; f: string | null }>(
            `SELECT extract(epoch FROM created_on) * 1000 AS c, extract(epoch FROM started_on) * 1000 AS s, extract(epoch FROM completed_on) * 1000 AS f
               FROM pgboss.job WHERE name = 'bench' AND created_on >= to_timestamp($1::double precision / 1000)`,
            [from],
          )
        ).rows.map((r) => ({
          c: Number(r.c),
          s: r.s === null ? NaN : Number(r.s),
          f: r.f === null ? NaN : Number(r.f),
        })),
      close: once(async () => {
        try {
          await closeDb();
          await stopAll(children);
          await stopBoss();
          return (await pgDatabaseStats(url)).commits;
        } finally {
          await dropPgDatabase(url);
        }
      }),
    };
  } catch (err) {
    await closeDb().catch(() => {});
    await stopAll(children);
    await stopBoss().catch(() => {});
    await dropPgDatabase(url);
    throw err;
  }
}

async function waitFinished(sys: System, count: number, deadline: number): Promise<number> {
  for (;;) {
    const n = await sys.finished();
    if (n >= count || Date.now() > deadline) return n;
    await sleep(100);
  }
}

const pickups = (t: Times) => t.filter((r) => Number.isFinite(r.s)).map((r) => r.s - r.c);

async function queueRun(label: string, start: () => Promise<System>): Promise<QueueRun> {
  const n = settings.queueJobs;
  const sys = await start();
  try {
    // Paced: an idle queue, one job every 1000/PACED_RATE ms (not waiting for answers to keep the pace).
    const p0 = Date.now();
    const paced: Promise<boolean>[] = [];
    for (let i = 0; i < PACED_JOBS; i++) {
      await sleep(Math.max(0, p0 + (i * 1000) / PACED_RATE - Date.now()));
      paced.push(sys.submit());
    }
    await Promise.all(paced);
    await waitFinished(sys, PACED_JOBS, Date.now() + 30_000);
    const pacedPickups = pickups(await sys.times(p0));

    // Bulk: n jobs as fast as `submitConcurrency` submitters go.
    let failed = 0;
    const t0 = Date.now();
    const deadline = t0 + RUN_TIMEOUT_MS;
    let submitted = 0;
    await inParallel(n, settings.submitConcurrency, async () => {
      if (Date.now() > deadline) return;
      if (!(await sys.submit())) failed++;
      submitted++;
    });
    const submitSeconds = (Date.now() - t0) / 1000;
    if (failed) note(`queue ${label}: ${failed} submits failed`);
    const finished = (await waitFinished(sys, PACED_JOBS + submitted - failed, deadline)) - PACED_JOBS;
    const timedOut = finished < n;
    const t = await sys.times(t0);
    const done = t.filter((r) => Number.isFinite(r.f));
    const end = timedOut ? Date.now() : Math.max(...done.map((r) => r.f));
    if (timedOut)
      note(
        `queue ${label}: cut short after ${RUN_TIMEOUT_MS / 1000} s with ${finished} of ${n} jobs finished; jobs/s counts those`,
      );
    const p = pickups(t);
    const commits = await sys.close();
    return {
      jobs: n,
      finished: done.length,
      timedOut,
      submitSeconds,
      endToEndSeconds: (end - t0) / 1000,
      jobsPerSecond: done.length / ((end - t0) / 1000),
      pickupP50: quantile(p, 0.5),
      pickupP99: quantile(p, 0.99),
      pacedPickupP50: quantile(pacedPickups, 0.5),
      pacedPickupP99: quantile(pacedPickups, 0.99),
      commitsPerJob: commits / (PACED_JOBS + submitted),
    };
  } finally {
    await sys.close().catch(() => {});
  }
}

export async function queueScenario(): Promise<Row[]> {
  setScenario('queue');
  const began = Date.now();
  const systems: Record<string, () => Promise<System>> = {
    'media-jobs 1w': () => startMediaJobs(1),
    'media-jobs 4w': () => startMediaJobs(4),
    'pg-boss 1w': () => startPgBoss(1),
    'pg-boss 4w': () => startPgBoss(4),
  };
  const runs: Record<string, QueueRun[]> = {};
  let rounds = 0;
  for (let i = 0; i < settings.rounds; i++) {
    const r0 = Date.now();
    if (i > 0 && Date.now() - began + (r0 - began) / i > SCENARIO_BUDGET_MS) {
      note(
        `queue: ${i} of ${settings.rounds} rounds, to stay within its ${SCENARIO_BUDGET_MS / 1000} s budget (BENCH_QUEUE_BUDGET)`,
      );
      break;
    }
    for (const [name, start] of Object.entries(systems)) {
      const r = await queueRun(name, start);
      (runs[name] ??= []).push(r);
      log(
        `  round ${i + 1} ${name}: ${fmt.int(r.jobsPerSecond)} jobs/s end-to-end (${r.endToEndSeconds.toFixed(1)} s; submits took ${r.submitSeconds.toFixed(1)} s), ` +
          `pickup p50 ${fmt.ms(r.pickupP50)}, p99 ${fmt.ms(r.pickupP99)}; paced pickup p50 ${fmt.ms(r.pacedPickupP50)}, p99 ${fmt.ms(r.pacedPickupP99)}; ` +
          `${r.commitsPerJob.toFixed(1)} PostgreSQL transactions per job`,
      );
    }
    rounds++;
  }
  raw.queue = {
    jobs: settings.queueJobs,
    submitConcurrency: settings.submitConcurrency,
    workerSlots: WORKER_SLOTS,
    pgBossBatch: PGBOSS_BATCH,
    rounds,
    runs,
  };
  const m = (name: string) => {
    const rs = runs[name]!;
    const med = (f: (r: QueueRun) => number) => median(rs.map(f));
    return {
      jps: med((r) => r.jobsPerSecond),
      sps: med((r) => r.jobs / r.submitSeconds),
      p50: med((r) => r.pickupP50),
      p99: med((r) => r.pickupP99),
      pp50: med((r) => r.pacedPickupP50),
      pp99: med((r) => r.pacedPickupP99),
      commits: med((r) => r.commitsPerJob),
      cut: rs.some((r) => r.timedOut),
    };
  };
  const rows: Row[] = [];
  const of = rounds === settings.rounds ? '' : ` (${rounds} round${rounds > 1 ? 's' : ''})`;
  for (const w of [1, 4]) {
    const mj = m(`media-jobs ${w}w`);
    const pb = m(`pg-boss ${w}w`);
    const procs = `${w} worker process${w > 1 ? 'es' : ''}`;
    rows.push({
      scenario: '3 queue',
      case: `PostgreSQL, ${fmt.int(settings.queueJobs)} no-op jobs, ${procs} × ${WORKER_SLOTS} slots, ${settings.submitConcurrency} concurrent submits: end-to-end${of}`,
      value: `${fmt.int(mj.jps)} jobs/s${mj.cut ? ' (cut short)' : ''}; submits ${fmt.int(mj.sps)}/s over HTTP; ${mj.commits.toFixed(1)} PG transactions/job`,
      reference: `pg-boss (batch ${PGBOSS_BATCH}): ${fmt.int(pb.jps)} jobs/s${pb.cut ? ' (cut short)' : ''}; sends ${fmt.int(pb.sps)}/s; ${pb.commits.toFixed(1)} PG transactions/job`,
      target: `ahead of pg-boss: ${fmt.pct(mj.jps / pb.jps)}`,
      ok: mj.jps > pb.jps,
    });
    rows.push({
      scenario: '3 queue',
      case: `PostgreSQL, ${procs}: pickup (created → started), bulk run`,
      value: `p50 ${fmt.ms(mj.p50)}, p99 ${fmt.ms(mj.p99)}`,
      reference: `pg-boss: p50 ${fmt.ms(pb.p50)}, p99 ${fmt.ms(pb.p99)}`,
      target: 'p50 < 10 ms',
      ok: mj.p50 < 10,
    });
    rows.push({
      scenario: '3 queue',
      case: `PostgreSQL, ${procs}: pickup on an idle queue (${PACED_JOBS} jobs at ${PACED_RATE}/s)`,
      value: `p50 ${fmt.ms(mj.pp50)}, p99 ${fmt.ms(mj.pp99)}`,
      reference: `pg-boss: p50 ${fmt.ms(pb.pp50)}, p99 ${fmt.ms(pb.pp99)}`,
      target: 'p50 < 10 ms',
      ok: mj.pp50 < 10,
    });
  }
  return rows;
}
