import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleepJobType } from '../helpers/job-types.js';
import { startService, waitFor, waitTerminal, type TestService } from '../helpers/service.js';

const lines: any[] = [];
const sink = new Writable({
  write(chunk, _enc, cb) {
    for (const l of String(chunk).split('\n')) if (l.trim()) lines.push(JSON.parse(l));
    cb();
  },
});

let svc: TestService;
beforeAll(async () => {
  svc = await startService(
    { WORKER_CONCURRENCY: '1', RATE_LIMIT_SUBMIT: '1000', RATE_LIMIT_READ: '1000' },
    { jobTypes: [sleepJobType()], log: pino({ level: 'info' }, sink) },
  );
});
afterAll(() => svc?.stop());

const submit = async (input: Record<string, unknown>, headers: Record<string, string> = {}, key?: string) =>
  svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
    body: { job_type: 'test-sleep', model: 'v1', input },
    headers,
    ...(key ? { key } : {}),
  });

describe('GET /jobs', () => {
  it('lists the caller’s jobs newest first, filters, and paginates with a cursor', async () => {
    const key = await svc.newKey('lister');
    const made: string[] = [];
    for (let i = 0; i < 5; i++) made.push((await submit({ ms: 1 }, {}, key)).body.data.uuid);
    await Promise.all(made.map((u) => waitTerminal(svc.call, u, key)));
    const cancelled = (await submit({ ms: 60_000 }, {}, key)).body.data.uuid;
    await svc.call('POST', `/api/v1/jobs/${cancelled}/cancel`, { key });

    const all = await svc.call('GET', '/api/v1/jobs?limit=100', { key });
    expect(all.status).toBe(200);
    expect(all.body.data.jobs.map((j: any) => j.uuid)).toEqual([cancelled, ...made.reverse()]);
    expect(all.body.data.next_cursor).toBeNull();

    const p1 = await svc.call('GET', '/api/v1/jobs?limit=4', { key });
    expect(p1.body.data.jobs).toHaveLength(4);
    const p2 = await svc.call('GET', `/api/v1/jobs?limit=4&cursor=${p1.body.data.next_cursor}`, { key });
    expect(p2.body.data.jobs).toHaveLength(2);
    expect(p2.body.data.next_cursor).toBeNull();
    expect([...p1.body.data.jobs, ...p2.body.data.jobs].map((j: any) => j.uuid)).toEqual(
      all.body.data.jobs.map((j: any) => j.uuid),
    );

    const onlyCancelled = await svc.call('GET', '/api/v1/jobs?status=cancelled', { key });
    expect(onlyCancelled.body.data.jobs.map((j: any) => j.uuid)).toEqual([cancelled]);
    expect((await svc.call('GET', '/api/v1/jobs?job_type=image-transform', { key })).body.data.jobs).toEqual([]);
    // Another owner sees none of them.
    const other = await svc.call('GET', '/api/v1/jobs?limit=100');
    expect(other.body.data.jobs.some((j: any) => made.includes(j.uuid))).toBe(false);
  });

  it.each([
    ['status=done', /^status: must be one of/],
    ['limit=0', 'limit: must be at least 1'],
    ['limit=101', 'limit: must be at most 100'],
    ['limit=ten', /^limit: /],
    ['cursor=garbage', 'cursor: not a cursor returned by this endpoint'],
    ['sort=asc', 'sort: unknown field'],
  ])('rejects ?%s with 400', async (qs, message) => {
    const r = await svc.call('GET', `/api/v1/jobs?${qs}`);
    expect(r.status).toBe(400);
    if (typeof message === 'string') expect(r.body.message).toBe(message);
    else expect(r.body.message).toMatch(message);
  });
});

describe('long polling', () => {
  it('GET status?wait returns as soon as the job is terminal', async () => {
    const uuid = (await submit({ ms: 300 })).body.data.uuid;
    const r = await svc.call('GET', `/api/v1/jobs/${uuid}/status?wait=30`);
    expect(r.body.data.status).toBe('completed');
  });

  it('returns the current state when the wait ends first', async () => {
    const uuid = (await submit({ ms: 60_000 })).body.data.uuid;
    const r = await svc.call('GET', `/api/v1/jobs/${uuid}/status?wait=1`);
    expect(['queued', 'processing']).toContain(r.body.data.status);
    await svc.call('POST', `/api/v1/jobs/${uuid}/cancel`);
  });

  it('caps wait at 60 seconds', async () => {
    const uuid = (await submit({ ms: 1 })).body.data.uuid;
    const r = await svc.call('GET', `/api/v1/jobs/${uuid}/status?wait=61`);
    expect(r.status).toBe(400);
    expect(r.body.message).toBe('wait: must be at most 60');
  });

  // The common shapes take a fast check before zod (http/validation.ts); the rest are zod's, in its words.
  it.each([
    ['', 200, undefined],
    ['wait=0', 200, undefined],
    ['wait=05', 200, undefined],
    ['wait=%205', 200, undefined],
    ['wait=61', 400, 'wait: must be at most 60'],
    ['wait=100', 400, 'wait: must be at most 60'],
    ['wait=-1', 400, /^wait: /],
    ['wait=1.5', 400, /^wait: /],
    ['wait=abc', 400, /^wait: /],
    ['wait=1&wait=2', 400, /^wait: /],
    ['wat=1', 400, /unknown field/],
    ['wait=1&x=2', 400, /unknown field/],
  ])('answers status?%s of a finished job with %i', async (qs, status, message) => {
    const uuid = (await submit({ ms: 1 })).body.data.uuid;
    await svc.call('GET', `/api/v1/jobs/${uuid}/status?wait=30`);
    const r = await svc.call('GET', `/api/v1/jobs/${uuid}/status${qs ? `?${qs}` : ''}`);
    expect(r.status).toBe(status);
    if (status === 200) expect(r.body.data.status).toBe('completed');
    else if (typeof message === 'string') expect(r.body.message).toBe(message);
    else expect(r.body.message).toMatch(message!);
  });

  it('Prefer: wait on submit answers with the finished job', async () => {
    const r = await submit({ ms: 200 }, { prefer: 'wait=30' });
    expect(r.status).toBe(200);
    expect(r.headers.get('preference-applied')).toBe('wait=30');
    expect(r.body.data.status).toBe('completed');
  });
});

describe('queue position', () => {
  it('tells a queued job its place while the single worker is busy', async () => {
    const busy = (await submit({ ms: 60_000 })).body.data.uuid;
    await waitFor(
      async () => (await svc.call('GET', `/api/v1/jobs/${busy}/status`)).body.data.status === 'processing',
      'busy',
    );
    const a = (await submit({ ms: 1 })).body.data.uuid;
    const b = (await submit({ ms: 1 })).body.data.uuid;
    expect((await svc.call('GET', `/api/v1/jobs/${a}/status`)).body.data.status_detail).toBe(
      'waiting for a worker (position 1 in the queue)',
    );
    expect((await svc.call('GET', `/api/v1/jobs/${b}/status`)).body.data.status_detail).toBe(
      'waiting for a worker (position 2 in the queue)',
    );
    await svc.call('POST', `/api/v1/jobs/${busy}/cancel`);
    await waitTerminal(svc.call, b);
  });
});

describe('operations endpoints', () => {
  it('/healthz and /readyz answer without a key', async () => {
    const h = await svc.call('GET', '/healthz', { key: null });
    expect(h.status).toBe(200);
    expect(h.body).toEqual({ code: 0, message: 'ok', data: { status: 'ok' } });
    const r = await svc.call('GET', '/readyz', { key: null });
    expect(r.status).toBe(200);
    expect(r.body.data.status).toBe('ready');
  });

  it('/metrics exposes job, queue, webhook and HTTP metrics in Prometheus format', async () => {
    const uuid = (await submit({ ms: 1 })).body.data.uuid;
    await waitTerminal(svc.call, uuid);
    const m = await svc.call('GET', '/metrics', { key: null });
    expect(m.status).toBe(200);
    expect(m.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(m.text).toMatch(/media_jobs_jobs_submitted_total\{job_type="test-sleep"\} \d+/);
    expect(m.text).toMatch(/media_jobs_jobs_finished_total\{job_type="test-sleep",status="completed"\} \d+/);
    expect(m.text).toMatch(/media_jobs_queue_depth\{status="queued"\} \d+/);
    expect(m.text).toMatch(
      /media_jobs_job_processing_seconds_bucket\{le="0.01",job_type="test-sleep",status="completed"\}/,
    );
    expect(m.text).toMatch(
      /media_jobs_http_request_duration_seconds_count\{method="GET",route="\/api\/v1\/jobs\/:uuid\/status",status_code="200"\} \d+/,
    );
    expect(m.text).toContain('# TYPE media_jobs_webhook_attempts_total counter');
  });

  it('logs one JSON line per request with request_id and job_uuid', async () => {
    const uuid = (await submit({ ms: 1 })).body.data.uuid;
    await svc.call('GET', `/api/v1/jobs/${uuid}/status`, { headers: { 'x-request-id': 'log-probe-1' } });
    const line = await waitFor(
      () => lines.find((l) => l.request_id === 'log-probe-1' && l.msg === 'request'),
      'the request log line',
    );
    expect(line).toMatchObject({ job_uuid: uuid, status: 200, route: '/api/v1/jobs/:uuid/status', method: 'GET' });
    const jobLines = await waitFor(() => {
      const found = lines.filter((l) => l.job_uuid === uuid && l.msg.startsWith('job '));
      return found.some((l) => l.msg === 'job completed') ? found : undefined;
    }, 'the job log lines');
    expect(jobLines.map((l) => l.msg)).toEqual(['job started', 'job completed']);
  });
});

/** The real Redis on this machine, or why the Redis variant is skipped (never skipped when REQUIRE_REDIS=true). */
async function redisAvailable(): Promise<boolean> {
  const probe = new Redis(REDIS_URL, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 2000,
    retryStrategy: () => null,
  });
  probe.on('error', () => {});
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch (err) {
    if (process.env.REQUIRE_REDIS === 'true')
      throw new Error(`REQUIRE_REDIS=true but Redis at ${REDIS_URL} is unreachable: ${(err as Error).message}`, {
        cause: err,
      });
    console.warn(
      `rate limits on Redis: SKIPPED, Redis at ${REDIS_URL} is unreachable (set REQUIRE_REDIS=true to fail instead)`,
    );
    return false;
  } finally {
    probe.disconnect();
  }
}
const REDIS_URL = 'redis://127.0.0.1:6379';
const redisUp = await redisAvailable();

const NO_ENV: Record<string, string> = {};
describe.each([
  { store: 'local', env: NO_ENV },
  // A unique key prefix per run: counters never leak between tests or runs.
  { store: 'redis', env: { REDIS_URL, REDIS_KEY_PREFIX: `media-jobs-test:${randomUUID()}:` } },
])('rate limits ($store store)', ({ store, env }) => {
  it.skipIf(store === 'redis' && !redisUp)(
    'answers 429 with Retry-After and RateLimit headers past the per-key limit',
    async () => {
      const limited = await startService(
        { RATE_LIMIT_SUBMIT: '3', RATE_LIMIT_READ: '0', WORKER_CONCURRENCY: '0', ...env },
        { jobTypes: [sleepJobType()] },
      );
      try {
        const body = { job_type: 'test-sleep', model: 'v1', input: {} };
        const replies = [];
        for (let i = 0; i < 4; i++)
          replies.push(await limited.call('POST', '/api/v1/jobs/submit/test-sleep', { body }));
        expect(replies.slice(0, 3).map((r) => r.status)).toEqual([200, 200, 200]);
        expect(replies[0]!.headers.get('ratelimit-policy')).toBe('"submit";q=3;w=60');
        expect(replies[2]!.headers.get('ratelimit')).toMatch(/^"submit";r=0;t=\d+$/);
        // The plugin's IETF draft fields (enableDraftSpec).
        expect(replies[1]!.headers.get('ratelimit-limit')).toBe('3');
        expect(replies[1]!.headers.get('ratelimit-remaining')).toBe('1');
        const r = replies[3]!;
        expect(r.status).toBe(429);
        expect(r.body.code).toBe(-1);
        expect(r.body.data).toEqual({});
        expect(r.body.message).toMatch(/^rate limit exceeded: 3 submit requests per minute/);
        expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
        // Per key: another key still gets through; reads are not limited here.
        const other = await limited.newKey('other');
        expect((await limited.call('POST', '/api/v1/jobs/submit/test-sleep', { body, key: other })).status).toBe(200);
        expect((await limited.call('GET', '/api/v1/job-types')).status).toBe(200);
      } finally {
        await limited.stop();
      }
    },
  );

  it.skipIf(store === 'redis' && !redisUp)(
    'limits reads per key across routes; cancels count apart (write policy, the read limit)',
    async () => {
      const limited = await startService(
        { RATE_LIMIT_SUBMIT: '0', RATE_LIMIT_READ: '3', WORKER_CONCURRENCY: '0', ...env },
        { jobTypes: [sleepJobType()] },
      );
      try {
        const statuses = [
          (await limited.call('GET', '/api/v1/job-types')).status,
          (await limited.call('GET', '/api/v1/jobs')).status,
          (await limited.call('POST', '/api/v1/jobs/00000000-0000-4000-8000-000000000000/cancel')).status,
          (await limited.call('GET', '/api/v1/jobs')).status,
        ];
        expect(statuses).toEqual([200, 200, 404, 200]);
        const r = await limited.call('GET', '/api/v1/jobs');
        expect(r.status).toBe(429);
        expect(r.headers.get('ratelimit-policy')).toBe('"read";q=3;w=60');
        expect(r.body.message).toMatch(/^rate limit exceeded: 3 read requests per minute/);
        // Submits are not limited here.
        expect(
          (
            await limited.call('POST', '/api/v1/jobs/submit/test-sleep', {
              body: { job_type: 'test-sleep', model: 'v1', input: {} },
            })
          ).status,
        ).toBe(200);
      } finally {
        await limited.stop();
      }
    },
  );
});
