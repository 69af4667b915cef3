import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, spawnService, type ChildService } from '../helpers/child.js';
import { storeEnv } from '../helpers/db.js';
import { startMediaServer, type MediaServer } from '../helpers/media-server.js';
import { waitFor } from '../helpers/service.js';

// Runs in the PostgreSQL project only (see vitest.config.ts): several processes on one database.

let media: MediaServer;
const procs: ChildService[] = [];
const deliveries = new Map<string, number>();
let receiverUrl = '';
let closeReceiver: () => Promise<void>;

beforeAll(async () => {
  media = await startMediaServer();
  const receiver = createServer((req: IncomingMessage, res) => {
    const id = String(req.headers['x-service-event-id']);
    deliveries.set(id, (deliveries.get(id) ?? 0) + 1);
    req.resume();
    req.on('end', () => res.writeHead(204).end());
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  closeReceiver = () => new Promise((r) => receiver.close(() => r()));
});
afterAll(async () => {
  for (const p of procs) if (p.proc.exitCode === null) await p.kill9();
  await media?.close();
  await closeReceiver?.();
});

const transform = (source: string, webhook?: string) => ({
  job_type: 'image-transform',
  model: 'nearest',
  input: { source, width: 16, format: 'png' },
  ...(webhook ? { webhook: { url: webhook, secret: 'multi' } } : {}),
});

describe('two API processes and two worker processes on one PostgreSQL', () => {
  let env: Record<string, string>;
  let key: string;
  let api: ChildService[];
  let workers: ChildService[];

  beforeAll(async () => {
    env = {
      ...(await storeEnv()),
      JOB_LEASE: '2s',
      QUEUE_POLL_INTERVAL: '2s',
      WORKER_CONCURRENCY: '4',
      RATE_LIMIT_READ: '0',
      RATE_LIMIT_SUBMIT: '0',
    };
    key = cli(['keys', 'create', '--owner', 'scale'], env).lastLine;
    api = [await spawnService(env, key, { role: 'api' }), await spawnService(env, key, { role: 'api' })];
    workers = [await spawnService(env, key, { role: 'worker' }), await spawnService(env, key, { role: 'worker' })];
    procs.push(...api, ...workers);
  });

  it('runs 500 jobs submitted across both API processes exactly once, with one webhook each', async () => {
    const N = 500;
    const uuids: string[] = [];
    // Submit in parallel batches, alternating API processes.
    for (let batch = 0; batch < N; batch += 25) {
      const replies = await Promise.all(
        Array.from({ length: 25 }, (_, j) => {
          const i = batch + j;
          return api[i % 2]!.call('POST', '/api/v1/jobs/submit/image-transform', {
            body: transform(media.url(`/small.png?job=${i}`), receiverUrl),
          });
        }),
      );
      for (const r of replies) {
        expect(r.status).toBe(200);
        uuids.push(r.body.data.uuid);
      }
    }
    expect(new Set(uuids).size).toBe(N);

    await waitFor(
      async () => {
        const counts = await Promise.all(uuids.map((u, i) => api[i % 2]!.call('GET', `/api/v1/jobs/${u}/status`)));
        return counts.every((r) => r.body.data.status === 'completed');
      },
      'all 500 jobs to complete',
      240_000,
    );

    // Exactly once: each job's media was fetched by exactly one attempt.
    const fetched = new Map<string, number>();
    for (const r of media.requests) if (r.startsWith('/small.png?job=')) fetched.set(r, (fetched.get(r) ?? 0) + 1);
    expect(fetched.size).toBe(N);
    expect([...fetched.values()].every((c) => c === 1)).toBe(true);

    await waitFor(() => deliveries.size >= N, 'every webhook', 120_000);
    expect(deliveries.size).toBe(N);
    expect([...deliveries.values()].every((c) => c === 1)).toBe(true);
  }, 400_000);

  it('cancels a job from one API process and aborts it on the worker process running it', async () => {
    const uuid = (
      await api[0]!.call('POST', '/api/v1/jobs/submit/image-transform', {
        body: transform(media.url('/hold/cancel.jpg')),
      })
    ).body.data.uuid;
    await waitFor(() => media.requests.includes('/hold/cancel.jpg'), 'a worker to start the download');
    const conns = media.openConnections();
    const r = await api[1]!.call('POST', `/api/v1/jobs/${uuid}/cancel`);
    expect(r.body.data.status).toBe('cancelled');
    // The worker aborts its download: the held connection closes.
    await waitFor(() => media.openConnections() < conns, 'the worker to abort the download', 10_000);
    expect((await api[0]!.call('GET', `/api/v1/jobs/${uuid}/status`)).body.data.status).toBe('cancelled');
  });

  it('survives SIGKILL of a worker mid-job: the other worker completes it', async () => {
    const uuid = (
      await api[0]!.call('POST', '/api/v1/jobs/submit/image-transform', {
        body: transform(media.url('/hold/crash.jpg')),
      })
    ).body.data.uuid;
    await waitFor(() => media.requests.includes('/hold/crash.jpg'), 'a worker to start the job');
    // Find the worker process that holds the lease (lease_owner is host:pid:nonce) and kill it.
    const db = new pg.Client({ connectionString: env.DATABASE_URL });
    await db.connect();
    const { rows } = await db.query('SELECT lease_owner FROM jobs WHERE uuid = $1', [uuid]);
    await db.end();
    const pid = Number(String(rows[0].lease_owner).split(':')[1]);
    const victim = workers.find((w) => w.proc.pid === pid)!;
    const survivor = workers.find((w) => w !== victim)!;
    expect(victim).toBeDefined();
    await victim.kill9();
    await waitFor(
      () => media.requests.filter((r) => r === '/hold/crash.jpg').length >= 2,
      'the survivor to reclaim the job',
      60_000,
    );
    media.release();
    await waitFor(
      async () => (await api[1]!.call('GET', `/api/v1/jobs/${uuid}/status`)).body.data.status === 'completed',
      'completion',
      60_000,
    );
    expect(survivor.proc.exitCode).toBeNull();
  });

  it('never loses an acknowledged submit when an API process is killed', async () => {
    const acked: string[] = [];
    let stop = false;
    const loop = (async () => {
      for (let i = 0; !stop && i < 2000; i++) {
        try {
          const r = await api[0]!.call('POST', '/api/v1/jobs/submit/image-transform', {
            body: transform(media.url(`/small.png?ack=${i}`)),
          });
          if (r.body.code === 0) acked.push(r.body.data.uuid);
        } catch {
          return; // the process died under us: unacknowledged requests may be lost, acknowledged never
        }
      }
    })();
    await waitFor(() => acked.length >= 20, 'some acknowledged submits');
    await api[0]!.kill9();
    stop = true;
    await loop;
    for (const u of acked) {
      const r = await api[1]!.call('GET', `/api/v1/jobs/${u}/status`);
      expect(r.status).toBe(200);
    }
    await waitFor(
      async () => {
        const all = await Promise.all(acked.map((u) => api[1]!.call('GET', `/api/v1/jobs/${u}/status`)));
        return all.every((r) => r.body.data.status === 'completed');
      },
      'acknowledged jobs to complete',
      120_000,
    );
  });
});
