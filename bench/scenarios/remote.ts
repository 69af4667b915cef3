/**
 * Scenario: remote workers against built-in workers, in one service and one run.
 *
 * One `all` process (SQLite by default; BENCH_REMOTE_DB=postgres) runs the built-in `bench-noop`
 * type in WORKER_SLOTS in-process slots and declares `bench-remote-noop` in JOB_TYPES_FILE. A remote
 * worker in this process, the TypeScript SDK (runWorker, WORKER_SLOTS loops), speaks the protocol
 * (docs/workers.md) over HTTP: long-poll claim (wait 30 s), PUT output, complete.
 *   claim-to-start: PACED jobs submitted one at a time on an idle queue while the loops long-poll:
 *                   from the submit request to the moment the SDK calls the handler;
 *   jobs/s:         BENCH_REMOTE_JOBS no-op jobs of each kind by 32 concurrent submitters, from the
 *                   first submit to the last terminal state (remote first, then built-in with the
 *                   remote loops stopped, so neither competes with the other).
 */
import fs from 'node:fs';
import path from 'node:path';
import { openStore } from '../../src/store/db.js';
import { createWorkerToken } from '../../src/store/worker-tokens.js';
import { runWorker } from '../../src/worker-sdk/index.js';
import {
  fmt,
  freshStore,
  httpClient,
  inParallel,
  log,
  quantile,
  raw,
  setScenario,
  startService,
  stopAll,
  waitUntil,
  type Db,
  type Row,
  type Service,
} from '../lib.js';

const WORKER_SLOTS = 8;
const PACED = 50;
const JOBS = Number(process.env.BENCH_REMOTE_JOBS ?? 2_000);
const DB = (process.env.BENCH_REMOTE_DB ?? 'sqlite') as Db;
const REMOTE_TYPE = 'bench-remote-noop';

interface RemoteCase {
  db: Db;
  claimToStartP50: number;
  claimToStartP99: number;
  builtinPickupP50: number;
  builtinPickupP99: number;
  remoteJobsPerSecond: number;
  builtinJobsPerSecond: number;
}

/**
 * The remote worker: the TypeScript SDK (`media-jobs/worker`) with `slots` loops, each long-polling
 * (30 s) while its slot is free; the no-op handler returns a JSON result, which the SDK uploads
 * (`PUT …/output`) and completes. Three HTTP round trips per job, as any worker makes them.
 */
function remoteWorker(base: string, token: string, slots: number, onStart: (uuid: string) => void) {
  let failure: Error | undefined;
  const worker = runWorker({
    url: base,
    token,
    jobTypes: [REMOTE_TYPE],
    concurrency: slots,
    handle: async (job) => {
      onStart(job.uuid);
      return { bytes: Buffer.from('"ok"'), contentType: 'application/json' };
    },
  });
  worker.done.catch((err: unknown) => (failure = err as Error));
  return {
    async stop() {
      await worker.stop(10_000);
      if (failure) throw failure;
    },
  };
}

async function runCase(db: Db): Promise<RemoteCase> {
  const store = await freshStore(db);
  const children: Service[] = [];
  const typesFile = path.join(store.dataDir, 'job-types.json');
  fs.writeFileSync(
    typesFile,
    JSON.stringify({
      job_types: [
        {
          name: REMOTE_TYPE,
          description: 'Benchmark no-op served by a remote worker.',
          models: [{ name: 'v1', description: 'no-op' }],
        },
      ],
    }),
  );
  try {
    const svc = await startService(store, {
      role: 'all',
      env: { WORKER_CONCURRENCY: String(WORKER_SLOTS), JOB_TYPES_FILE: typesFile },
      name: `remote-${db}`,
    });
    children.push(svc);
    const s = await openStore(store.url, { migrate: false });
    const { token } = await createWorkerToken(s.db, { name: 'bench', jobTypes: [REMOTE_TYPE] }, Date.now());
    const c = httpClient(svc.base, store.key, 32);
    const submit = async (type: string) => {
      const r = await c.call(
        'POST',
        `/api/v1/jobs/submit/${type}`,
        JSON.stringify({ job_type: type, model: 'v1', input: {} }),
      );
      if (r.status !== 200) throw new Error(`submit ${type}: ${r.status}`);
      return r.json.data.uuid as string;
    };
    const finished = async (type: string) =>
      Number(
        (
          await s.db
            .selectFrom('jobs')
            .select((eb) => eb.fn.countAll().as('n'))
            .where('job_type', '=', type)
            .where('status', '=', 'completed')
            .executeTakeFirstOrThrow()
        ).n,
      );

    // Claim-to-start: the loops are long-polling on an idle queue when each job arrives.
    const started = new Map<string, number>();
    const waiters = new Map<string, () => void>();
    const worker = remoteWorker(svc.base, token, WORKER_SLOTS, (uuid) => {
      started.set(uuid, performance.now());
      waiters.get(uuid)?.();
    });
    await new Promise((r) => setTimeout(r, 500));
    const latencies: number[] = [];
    for (let i = 0; i < PACED; i++) {
      const t0 = performance.now();
      const uuid = await submit(REMOTE_TYPE);
      if (!started.has(uuid)) await new Promise<void>((r) => waiters.set(uuid, r));
      latencies.push(started.get(uuid)! - t0);
      await new Promise((r) => setTimeout(r, 20));
    }

    const drain = async (type: string) => {
      const before = await finished(type);
      const t0 = performance.now();
      await inParallel(JOBS, 32, async () => {
        await submit(type);
      });
      await waitUntil(`${JOBS} ${type} jobs`, async () => (await finished(type)) >= before + JOBS, 300_000, 50);
      return (JOBS / (performance.now() - t0)) * 1000;
    };
    const remoteJobsPerSecond = await drain(REMOTE_TYPE);
    await worker.stop();

    // Built-in: pickup from the database's own times (created → started), then the same drain.
    const paced: string[] = [];
    for (let i = 0; i < PACED; i++) {
      paced.push(await submit('bench-noop'));
      await new Promise((r) => setTimeout(r, 20));
    }
    await waitUntil('paced built-in jobs', async () => (await finished('bench-noop')) >= PACED, 60_000, 50);
    const rows = await s.db
      .selectFrom('jobs')
      .select(['created_at', 'started_at'])
      .where('uuid', 'in', paced)
      .execute();
    const pickups = rows.map((r) => Number(r.started_at) - r.created_at);
    const builtinJobsPerSecond = await drain('bench-noop');
    await c.close();
    await s.close();
    return {
      db,
      claimToStartP50: quantile(latencies, 0.5),
      claimToStartP99: quantile(latencies, 0.99),
      builtinPickupP50: quantile(pickups, 0.5),
      builtinPickupP99: quantile(pickups, 0.99),
      remoteJobsPerSecond,
      builtinJobsPerSecond,
    };
  } finally {
    await stopAll(children);
    await store.dispose();
  }
}

export async function remoteScenario(): Promise<Row[]> {
  setScenario('remote');
  const c = await runCase(DB);
  raw.remote = c;
  const name = DB === 'sqlite' ? 'SQLite' : 'PostgreSQL';
  log(
    `  ${name}: claim-to-start p50 ${fmt.ms(c.claimToStartP50)} p99 ${fmt.ms(c.claimToStartP99)}; remote ${fmt.int(c.remoteJobsPerSecond)} jobs/s, ` +
      `built-in ${fmt.int(c.builtinJobsPerSecond)} jobs/s (pickup p50 ${fmt.ms(c.builtinPickupP50)})`,
  );
  return [
    {
      scenario: 'remote',
      case: `${name}: claim-to-start of a long-polling SDK worker (submit → handler), idle queue (${PACED} jobs)`,
      value: `p50 ${fmt.ms(c.claimToStartP50)}, p99 ${fmt.ms(c.claimToStartP99)}`,
      reference: `built-in pickup (created → started): p50 ${fmt.ms(c.builtinPickupP50)}, p99 ${fmt.ms(c.builtinPickupP99)}`,
      target: '(info)',
    },
    {
      scenario: 'remote',
      case: `${name}: ${fmt.int(JOBS)} no-op jobs, ${WORKER_SLOTS} slots, submit to last terminal`,
      value: `remote ${fmt.int(c.remoteJobsPerSecond)} jobs/s`,
      reference: `built-in ${fmt.int(c.builtinJobsPerSecond)} jobs/s (${fmt.pct(c.remoteJobsPerSecond / c.builtinJobsPerSecond)})`,
      target: '(info)',
    },
  ];
}
