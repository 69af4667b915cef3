import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, spawnService, type ChildService } from '../helpers/child.js';
import { storeEnv } from '../helpers/db.js';
import { startMediaServer, type MediaServer } from '../helpers/media-server.js';
import { waitFor } from '../helpers/service.js';

// Runs in the PostgreSQL project only (see vitest.config.ts): one `--role api` and one
// `--role worker` process on one database.

let media: MediaServer;
let api: ChildService;
let worker: ChildService;
let env: Record<string, string>;

beforeAll(async () => {
  media = await startMediaServer();
  env = {
    ...(await storeEnv()),
    WORKER_CONCURRENCY: '2',
    RATE_LIMIT_READ: '0',
    RATE_LIMIT_SUBMIT: '0',
  };
  const key = cli(['keys', 'create', '--owner', 'ops'], env).lastLine;
  api = await spawnService({ ...env, WORKER_CONCURRENCY: '0' }, key, { role: 'api' });
  worker = await spawnService(env, key, { role: 'worker' });
});
afterAll(async () => {
  for (const p of [api, worker]) if (p?.proc.exitCode === null) await p.kill9();
  media.release();
  await media?.close();
});

/** The value of one sample line of a Prometheus text exposition (undefined when absent). */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  const want = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .sort();
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = (m[2] ?? '').split(',').filter(Boolean).sort();
    if (got.length === want.length && got.every((l, i) => l === want[i])) return Number(m[3]);
  }
  return undefined;
}

async function metrics(p: ChildService): Promise<string> {
  const res = await fetch(`${p.base}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
  return res.text();
}

const transform = (source: string) => ({
  job_type: 'image-transform',
  model: 'nearest',
  input: { source, width: 16, format: 'png' },
});

describe('one API process and one worker process on PostgreSQL', () => {
  it('the worker-only process serves /healthz, /readyz and /metrics on its PORT, and nothing else', async () => {
    const health = await fetch(`${worker.base}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ code: 0, data: { status: 'ok' } });
    const ready = await fetch(`${worker.base}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ code: 0, data: { status: 'ready', database: 'postgres' } });
    expect(await metrics(worker)).toContain('# TYPE media_jobs_queue_depth gauge');
    for (const path of [
      '/api/v1/job-types',
      '/api/v1/jobs',
      '/api/v1/openapi.json',
      '/docs',
      '/dashboard/',
      '/admin/api/overview',
      '/api/v1/worker/claim',
    ]) {
      const r = await fetch(`${worker.base}${path}`);
      expect(r.status, path).toBe(404);
      expect(await r.json(), path).toMatchObject({ code: -1 });
    }
  });

  it("counts completions made in the worker process on the API process's /metrics, and the other way round", async () => {
    const before = await metrics(api);
    const finished = (text: string, status: string) =>
      sample(text, 'media_jobs_jobs_finished_total', { job_type: 'image-transform', status }) ?? 0;
    const submitted = (text: string) =>
      sample(text, 'media_jobs_jobs_submitted_total', { job_type: 'image-transform' }) ?? 0;
    const base = { completed: finished(before, 'completed'), submitted: submitted(before) };

    const uuids: string[] = [];
    for (let i = 0; i < 7; i++) {
      const r = await api.call('POST', '/api/v1/jobs/submit/image-transform', {
        body: transform(media.url(`/small.png?cluster=${i}`)),
      });
      expect(r.status).toBe(200);
      uuids.push(r.body.data.uuid);
    }
    await waitFor(
      async () => {
        const all = await Promise.all(uuids.map((u) => api.call('GET', `/api/v1/jobs/${u}/status`)));
        return all.every((r) => r.body.data.status === 'completed');
      },
      'seven jobs to complete in the worker process',
      120_000,
    );
    // A cancel made by the API process, of a job the worker is running (its download is held).
    const held = (
      await api.call('POST', '/api/v1/jobs/submit/image-transform', { body: transform(media.url('/hold/c.jpg')) })
    ).body.data.uuid as string;
    await waitFor(() => media.requests.includes('/hold/c.jpg'), 'the worker to start the held job');
    expect((await api.call('POST', `/api/v1/jobs/${held}/cancel`)).body.data.status).toBe('cancelled');

    // Both processes answer the cluster's totals: 7 completed (worker), 1 cancelled (API), 8 submitted.
    for (const p of [api, worker]) {
      const text = await metrics(p);
      expect(finished(text, 'completed') - base.completed).toBe(7);
      expect(finished(text, 'cancelled')).toBeGreaterThanOrEqual(1);
      expect(submitted(text) - base.submitted).toBe(8);
    }
    // Process-local figures keep their own names: the completions are the worker's, the cancel the API's.
    const apiText = await metrics(api);
    const workerText = await metrics(worker);
    const local = (text: string, status: string) =>
      sample(text, 'media_jobs_process_jobs_finished_total', { job_type: 'image-transform', status }) ?? 0;
    expect(local(apiText, 'completed')).toBe(0);
    expect(local(workerText, 'completed')).toBeGreaterThanOrEqual(7);
    expect(local(apiText, 'cancelled')).toBe(1);
    expect(sample(apiText, 'media_jobs_process_jobs_submitted_total', { job_type: 'image-transform' })).toBe(8);
    expect(sample(workerText, 'media_jobs_process_jobs_submitted_total', { job_type: 'image-transform' })).toBe(
      undefined,
    );
  }, 180_000);

  it("the operator view's throughput on the API process counts the worker's completions", async () => {
    const token = cli(['admin', 'create-token'], env).lastLine;
    const r = await api.call('GET', '/admin/api/overview', { key: token });
    expect(r.status).toBe(200);
    const { throughput } = r.body.data;
    expect(throughput.per_minute).toHaveLength(60);
    // 7 completed in the worker process and 1 cancelled through the API process, in the last hour.
    expect(throughput.finished_last_hour).toBe(8);
    expect(throughput.per_minute.reduce((n: number, p: { finished: number }) => n + p.finished, 0)).toBe(8);
  });
});
