/**
 * `npm run bench:explain`: the query plan of every job query on the hot paths, on SQLite and on
 * PostgreSQL, with BENCH_EXPLAIN_ROWS (default 1,000,000) queued jobs of one owner in the table.
 * Each store function runs for real inside a transaction that is rolled back, so the plans are
 * those of the statements the service sends; they are written to bench/results/explain.md.
 * What to look for: index seeks (SEARCH … USING INDEX, Index Scan / Index Only Scan with a LIMIT)
 * and no SCAN of jobs, no Seq Scan, no sort over the backlog.
 */
import { MOVES } from '../src/jobs/moves.js';
import fs from 'node:fs';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, type LogEvent } from 'kysely';
import pg from 'pg';
import { fillBacklog } from './scenarios/backlog.js';
import { freshStore, log, RESULTS_DIR, type Db } from './lib.js';
import type { Dialect } from '../src/store/store.js';
import {
  claimByUuid,
  claimJobs,
  countActive,
  deferJobs,
  duePurges,
  eraseJobData,
  expiredDeadlines,
  expiredLeases,
  insertJobs,
  markPurged,
  expiredResults,
  getJobView,
  insertJob,
  jobsAhead,
  listJobs,
  queueHead,
  renewLease,
  runningByOwner,
  updateState,
} from '../src/store/jobs.js';
import type { Database } from '../src/store/schema.js';
import { blobsOfJob, outputsOf, staleBlobs } from '../src/store/staged-blobs.js';
import { finishedPerMinute, readJobTotals } from '../src/store/totals.js';
import { findActiveWorkerToken } from '../src/store/worker-tokens.js';
import { findIdempotencyKeys } from '../src/store/idempotency.js';

const ROWS = Number(process.env.BENCH_EXPLAIN_ROWS ?? 1_000_000);

class Rollback extends Error {}

let sweep = '';

async function plans(db: Db): Promise<string[]> {
  const store = await freshStore(db);
  const out: string[] = [];
  try {
    // Every queued job has a deadline (none due): the deadline sweep's worst case.
    const last = await fillBacklog(store, ROWS, 'bench', { deadlines: true });
    const captured: Array<{ label: string; sql: string; params: readonly unknown[] }> = [];
    let label = '';
    let capturing = true;
    const onLog = (e: LogEvent) => {
      if (!capturing) return;
      // A statement run again under the same step (a claim's per-pick seek) is shown once.
      if (captured.some((c) => c.label === label && c.sql === e.query.sql)) return;
      captured.push({ label, sql: e.query.sql, params: e.query.parameters });
    };
    const sqlite = db === 'sqlite' ? new SQLite(store.url.slice('sqlite:'.length)) : undefined;
    const pool = db === 'postgres' ? new pg.Pool({ connectionString: store.url, max: 2 }) : undefined;
    const k = new Kysely<Database>({
      dialect: sqlite ? new SqliteDialect({ database: sqlite }) : new PostgresDialect({ pool: pool! }),
      log: onLog,
    });
    const dialect: Dialect = db;
    const now = Date.now();
    const step = async (name: string, fn: (t: Kysely<Database>) => Promise<unknown>) => {
      label = name;
      await k
        .transaction()
        .execute(async (t) => {
          await fn(t);
          throw new Rollback();
        })
        .catch((e: unknown) => {
          if (!(e instanceof Rollback)) throw e;
        });
    };
    const job = { uuid: last, vtime: ROWS - 1, created_at: now };
    const newJob = (owner: string) => ({
      uuid: '00000000-0000-4000-8000-ffffffffffff',
      owner,
      job_type: 'bench-noop',
      model: 'v1',
      input: '{}',
      webhook: null,
      status: 'queued' as const,
      status_detail: 'waiting for a worker',
      created_at: now,
      updated_at: now,
    });
    await step('submit: insert with virtual start time (owner with a backlog)', (t) => insertJob(t, newJob('bench')));
    await step('submit: insert with virtual start time (another owner)', (t) => insertJob(t, newJob('other')));
    const claim = { move: MOVES.claim, leaseOwner: 'explain/1', leaseMs: 30_000, now, limit: 8 };
    await step('claim 8 jobs, one job type', (t) => claimJobs(t, dialect, { ...claim, jobTypes: ['bench-noop'] }));
    await step('claim 8 jobs, three job types', (t) =>
      claimJobs(t, dialect, { ...claim, jobTypes: ['bench-noop', 'image-transform', 'image-face-swap'] }),
    );
    await step('status: the job by key', (t) => getJobView(t, last, 'bench'));
    await step('status: queue position (capped count)', (t) => jobsAhead(t, job, 1000));
    await step('metrics: queue depth', (t) => countActive(t));
    await step('metrics: cluster job totals (submitted, finished)', (t) => readJobTotals(t));
    await step('operator: finished per minute, last hour', (t) => {
      const minute = Math.floor(now / 60_000);
      return finishedPerMinute(t, minute - 59, minute);
    });
    await step('progress: renew a lease', (t) =>
      renewLease(t, MOVES.renew, last, 'explain/1', now + 30_000, 'working'),
    );
    await step('finish: conditional state change', (t) =>
      updateState(t, last, { ...MOVES.complete, leaseOwner: 'explain/1', now }),
    );
    await step('recovery: expired leases', (t) => expiredLeases(t, now, 100));
    await step('OWNER_MAX_RUNNING: queue head window', (t) => queueHead(t, ['bench-noop'], 200));
    await step('OWNER_MAX_RUNNING: running per owner', (t) => runningByOwner(t, ['bench', 'other']));
    await step('OWNER_MAX_RUNNING: defer a blocked owner', (t) => deferJobs(t, [last], ROWS + 1, now));
    await step('OWNER_MAX_RUNNING: claim picked jobs', (t) =>
      claimByUuid(t, [last], { ...claim, jobTypes: ['bench-noop'] }),
    );
    await step('housekeeping: results past retention', (t) => expiredResults(t, now));
    await step('list: newest jobs of an owner', (t) => listJobs(t, { owner: 'bench', limit: 21 }));
    await step('remote: worker token by hash', (t) => findActiveWorkerToken(t, 'mjw_explain'));
    await step('remote: output of an attempt', (t) => outputsOf(t, last, 'r.explain'));
    await step('remote: staged blobs of a job', (t) => blobsOfJob(t, last));
    await step('remote: sweep of ended attempts', (t) => staleBlobs(t, 1000));
    await step('list: by status', (t) => listJobs(t, { owner: 'bench', status: 'queued', limit: 21 }));
    // Round 2: deadlines, purges, priority, batches, progress.
    await step('submit: insert with priority and deadline', (t) =>
      insertJob(t, { ...newJob('bench'), priority: 300, deadline: now + 60_000 }),
    );
    await step('batch: insert 100 jobs (multi-row, vtimes from two seeks)', (t) =>
      insertJobs(
        t,
        Array.from({ length: 100 }, (_, i) => ({
          ...newJob('bench'),
          uuid: `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`,
        })),
      ),
    );
    await step('batch: idempotency keys of 100 items', (t) =>
      findIdempotencyKeys(
        t,
        'bench',
        Array.from({ length: 100 }, (_, i) => `batch:${i}`),
        now,
      ),
    );
    await step('deadlines: due deadlines (the sweep, every second)', (t) => expiredDeadlines(t, now, 500));
    await step('deadlines: cancel a queued job past its deadline', (t) =>
      updateState(t, last, {
        ...MOVES.expireQueued,
        deadlineBefore: now,
        set: { status_detail: 'deadline passed while queued' },
        retentionMs: 1,
        now,
      }),
    );
    await step('purge: due purges', (t) => duePurges(t, now, 100));
    await step('purge: erase a finished job (and its deliveries)', (t) =>
      eraseJobData(t, last, { from: MOVES.purge.from, owner: 'bench', now }),
    );
    await step('purge: mark the tombstone', (t) => markPurged(t, last, { from: MOVES.purged.from, now }));
    await step('progress: renew with structured progress', (t) =>
      renewLease(
        t,
        MOVES.renew,
        last,
        'explain/1',
        now + 30_000,
        'swapping faces (41 of 120)',
        '{"stage":"swapping faces","percent":34.2}',
      ),
    );

    // The deadline sweep's cost at this backlog: the statement housekeeping runs every second.
    capturing = false;
    const times: number[] = [];
    for (let i = 0; i < 200; i++) {
      const t0 = performance.now();
      await expiredDeadlines(k, Date.now(), 500);
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    sweep = `${db}: deadline sweep (${ROWS.toLocaleString('en-US')} queued jobs, each with a deadline, none due): p50 ${times[100]!.toFixed(3)} ms, p99 ${times[198]!.toFixed(3)} ms over 200 runs`;
    log(sweep);

    for (const c of captured) {
      if (/^(begin|commit|rollback)/i.test(c.sql.trim())) continue;
      let plan: string;
      if (sqlite) {
        const rows = sqlite.prepare(`EXPLAIN QUERY PLAN ${c.sql}`).all(...(c.params as unknown[])) as Array<{
          detail: string;
        }>;
        plan = rows.map((r) => r.detail).join('\n');
      } else {
        const client = await pool!.connect();
        try {
          const r = await client.query(`EXPLAIN ${c.sql}`, c.params as unknown[]);
          plan = r.rows.map((x: Record<string, string>) => x['QUERY PLAN']).join('\n');
        } finally {
          client.release();
        }
      }
      // A multi-row VALUES list is shown by its first rows.
      const text = c.sql
        .replace(/\s+/g, ' ')
        .trim()
        .replace(/((?:\([^()]*\), ){2})(?:\([^()]*\), )+(\([^()]*\))/g, '$1…, $2');
      out.push(`### ${c.label}\n\n\`\`\`sql\n${text}\n\`\`\`\n\`\`\`\n${plan}\n\`\`\`\n`);
      log(`${db} | ${c.label}\n${plan}\n`);
    }
    out.push(`### Cost of the deadline sweep\n\n${sweep}\n`);
    await k.destroy();
  } finally {
    await store.dispose();
  }
  return out;
}

const sections: string[] = [
  `# Query plans at ${ROWS.toLocaleString('en-US')} queued jobs\n\nWritten by \`npm run bench:explain\` (bench/explain.ts).\n`,
];
for (const db of ['sqlite', 'postgres'] as const) {
  sections.push(`## ${db === 'sqlite' ? 'SQLite' : 'PostgreSQL'}\n`, ...(await plans(db)));
}
fs.writeFileSync(path.join(RESULTS_DIR, 'explain.md'), sections.join('\n'));
log(`wrote bench/results/explain.md`);
