import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { JobType } from '../../src/processors/types.js';
import type { ResultStore } from '../../src/storage/types.js';
import { runs, sleepJobType } from '../helpers/job-types.js';
import { startService, waitFor, waitTerminal, type TestService } from '../helpers/service.js';
import { startReceiver, type Receiver } from '../webhooks/receiver.js';

/** Steps `steps` times, `ms` apart, reporting each step as structured progress. */
function steppingJobType(): JobType {
  const options = z.strictObject({ steps: z.int().min(1).max(1000), ms: z.int().min(1).max(1000) });
  const t: JobType<typeof options> = {
    name: 'test-steps',
    description: 'Test job type: reports progress per step.',
    slots: {},
    models: [{ name: 'v1', description: 'the only model' }],
    options,
    async run(ctx) {
      for (let i = 1; i <= ctx.options.steps; i++) {
        await sleep(ctx.options.ms, undefined, { signal: ctx.signal });
        ctx.progress('stepping', { current: i, total: ctx.options.steps });
      }
      return { bytes: Buffer.from('{"ok":true}'), contentType: 'application/json', extension: 'json' };
    },
  };
  return t;
}

let svc: TestService;
let rx: Receiver;
/** While true, the result store cannot delete (a storage outage during a purge). */
let storageDown = false;

beforeAll(async () => {
  rx = await startReceiver();
  svc = await startService(
    { WORKER_CONCURRENCY: '1', RATE_LIMIT_SUBMIT: '0' },
    {
      jobTypes: [sleepJobType(), steppingJobType()],
      wrapResults: (inner: ResultStore): ResultStore => ({
        put: (k, b, t, s) => inner.put(k, b, t, s),
        check: (s) => inner.check(s),
        signedUrl: (k, e) => inner.signedUrl(k, e),
        delete: async (k) => {
          if (storageDown) throw new Error('storage unavailable');
          await inner.delete(k);
        },
      }),
    },
  );
});
afterAll(async () => {
  await svc?.stop();
  await rx?.close();
});

const sleepJob = (input: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  job_type: 'test-sleep',
  model: 'v1',
  input,
  ...extra,
});
const submit = async (body: Record<string, unknown>, opts: { key?: string; headers?: Record<string, string> } = {}) =>
  svc.call('POST', `/api/v1/jobs/submit/${String(body.job_type)}`, { body, ...opts });
const status = async (uuid: string, key?: string) =>
  (await svc.call('GET', `/api/v1/jobs/${uuid}/status`, key ? { key } : {})).body.data;

/** Occupies the only worker slot until cancelled. */
async function blockWorker(): Promise<string> {
  const r = await submit(sleepJob({ ms: 120_000 }));
  await waitFor(async () => (await status(r.body.data.uuid)).status === 'processing', 'the blocker to run');
  return r.body.data.uuid as string;
}
const unblock = (uuid: string) => svc.call('POST', `/api/v1/jobs/${uuid}/cancel`);

describe('deadlines (cancel_after, Cancel-After)', () => {
  it('cancels a queued job and a running job past their deadlines, with job.cancelled delivered once', async () => {
    const blocker = await blockWorker();
    const webhook = { url: rx.url('/deadline') };
    const queued = await submit(sleepJob({ ms: 1 }, { cancel_after: '1s', webhook }));
    expect(queued.status).toBe(200);
    const q = queued.body.data;
    expect(Date.parse(q.deadline) - Date.parse(q.created_at)).toBe(1000);
    const done = await waitTerminal(svc.call, q.uuid);
    expect(done).toMatchObject({
      status: 'cancelled',
      status_detail: 'deadline passed while queued',
      started_at: null,
    });
    await unblock(blocker);

    const running = await submit(sleepJob({ ms: 120_000 }, { webhook }), { headers: { 'Cancel-After': '2' } });
    const r = running.body.data;
    expect(Date.parse(r.deadline) - Date.parse(r.created_at)).toBe(2000);
    const ended = await waitTerminal(svc.call, r.uuid);
    expect(ended).toMatchObject({ status: 'cancelled', status_detail: 'deadline passed while processing' });
    expect(ended.started_at).not.toBeNull();
    // The worker was aborted: its slot is free for the next job.
    await waitFor(() => (svc.app.workers!.activeJobs === 0 ? true : undefined), 'the worker to let go');

    await rx.waitForCount(2, 'the job.cancelled webhooks');
    await sleep(1500); // housekeeping ticks again: no second event
    for (const [uuid, detail] of [
      [q.uuid, 'deadline passed while queued'],
      [r.uuid, 'deadline passed while processing'],
    ] as const) {
      const mine = rx.requests.filter((x) => x.json().job?.uuid === uuid);
      expect(mine).toHaveLength(1);
      expect(mine[0]!.json()).toMatchObject({
        event_type: 'job.cancelled',
        job: { status: 'cancelled', status_detail: detail },
      });
      expect(mine[0]!.json().job).not.toHaveProperty('progress');
    }
  });

  it('refuses bad durations with a 400 naming the field, and creates nothing', async () => {
    const before: number = (await svc.call('GET', '/api/v1/jobs?limit=100')).body.data.jobs.length;
    for (const [extra, headers, message] of [
      [{ cancel_after: '0s' }, {}, 'cancel_after: must be between 1s and 7d'],
      [{ cancel_after: 8 * 86_400 }, {}, 'cancel_after: must be between 1s and 7d'],
      [
        { cancel_after: 'soon' },
        {},
        'cancel_after: must be a duration such as "90s", "5m" or "1h30m", or a number of seconds',
      ],
      [
        { cancel_after: true },
        {},
        'cancel_after: must be a duration such as "90s", "5m" or "1h30m", or a number of seconds',
      ],
      // A bad header is named as the header, not as the body field it stands for.
      [{}, { 'Cancel-After': '10d' }, 'Cancel-After: must be between 1s and 7d'],
      [{}, { 'Cancel-After': '0' }, 'Cancel-After: must be between 1s and 7d'],
      [
        {},
        { 'Cancel-After': 'soon' },
        'Cancel-After: must be a duration such as "90s", "5m" or "1h30m", or a number of seconds',
      ],
      [
        { cancel_after: '90s' },
        { 'Cancel-After': 'later' },
        'Cancel-After: must be a duration such as "90s", "5m" or "1h30m", or a number of seconds',
      ],
      [
        { cancel_after: '90s' },
        { 'Cancel-After': '5m' },
        "Cancel-After: differs from the body's cancel_after; give one of them",
      ],
      [{ priority: 601 }, {}, 'priority: must be at most 600'],
      [{ priority: 1.5 }, {}, 'priority: must be an integer'],
      [{ retention: '8d' }, {}, 'retention: must be between 1s and 7d'],
    ] as const) {
      const r = await submit(sleepJob({ ms: 1 }, extra), { headers });
      expect(r.status, JSON.stringify(extra)).toBe(400);
      expect(r.body).toEqual({ code: -1, message, data: {} });
    }
    // The same value in header and body is fine; "1h30m" is a duration.
    const same = await submit(sleepJob({ ms: 1 }, { cancel_after: '1h30m' }), { headers: { 'Cancel-After': '5400' } });
    expect(same.status).toBe(200);
    expect(Date.parse(same.body.data.deadline) - Date.parse(same.body.data.created_at)).toBe(5_400_000);
    await waitTerminal(svc.call, same.body.data.uuid);
    expect((await svc.call('GET', '/api/v1/jobs?limit=100')).body.data.jobs.length).toBe(before + 1);
  });
});

describe('deletion and retention', () => {
  it('deletes a finished job: 410 after, the signed URL dead, input and webhook secret gone', async () => {
    const webhook = { url: rx.url('/deleted'), secret: 'very-secret-value' };
    const job = (await submit(sleepJob({ ms: 1 }, { webhook }))).body.data;
    await waitTerminal(svc.call, job.uuid);
    const link = (await svc.call('GET', `/api/v1/jobs/${job.uuid}/result`)).body.data;
    expect((await fetch(link.url)).status).toBe(200);
    await waitFor(() => rx.requests.some((x) => x.json().job?.uuid === job.uuid), 'the job.completed webhook');

    const mallory = await svc.newKey('mallory');
    const theirs = await svc.call('DELETE', `/api/v1/jobs/${job.uuid}`, { key: mallory });
    expect(theirs.status).toBe(404);
    expect(theirs.body).toEqual({ code: -1, message: 'job not found', data: {} });

    const del = await svc.call('DELETE', `/api/v1/jobs/${job.uuid}`);
    expect(del.status).toBe(200);
    expect(del.body.data).toMatchObject({
      uuid: job.uuid,
      status: 'completed',
      result_ready: false,
      data_removed: true,
    });
    const again = await svc.call('DELETE', `/api/v1/jobs/${job.uuid}`);
    expect(again.status).toBe(200);
    expect(again.body.data).toEqual(del.body.data);

    const result = await svc.call('GET', `/api/v1/jobs/${job.uuid}/result`);
    expect(result.status).toBe(410);
    expect((await fetch(link.url)).status).not.toBe(200);
    expect(await status(job.uuid)).toMatchObject({ status: 'completed', data_removed: true, result_ready: false });

    const row = await svc.app.store.db
      .selectFrom('jobs')
      .selectAll()
      .where('uuid', '=', job.uuid)
      .executeTakeFirstOrThrow();
    expect(row.input).toBe('{}');
    expect(row.webhook).toBeNull();
    const events = await svc.app.store.db
      .selectFrom('webhook_events')
      .selectAll()
      .where('job_uuid', '=', job.uuid)
      .execute();
    expect(events.length).toBeGreaterThan(0);
    for (const e of events) {
      expect(e.secret).toBeNull();
      expect(e.body).not.toContain('very-secret-value');
      expect(e.body).toBe('{}');
    }
  });

  it('refuses to delete an active job (409) until it is cancelled', async () => {
    const blocker = await blockWorker();
    const queued = (await submit(sleepJob({ ms: 1 }))).body.data;
    for (const uuid of [blocker, queued.uuid]) {
      const r = await svc.call('DELETE', `/api/v1/jobs/${uuid}`);
      expect(r.status).toBe(409);
      expect(r.body.message).toMatch(/^job is (queued|processing); cancel it first/);
    }
    await svc.call('POST', `/api/v1/jobs/${queued.uuid}/cancel`);
    expect((await svc.call('DELETE', `/api/v1/jobs/${queued.uuid}`)).body.data.data_removed).toBe(true);
    await unblock(blocker);
  });

  it('shows the retention asked for and when the data will be purged', async () => {
    const own = (await submit(sleepJob({ ms: 1 }, { retention: '1h30m' }))).body.data;
    expect(own).toMatchObject({ retention: '1h30m', purge_at: null });
    const plain = (await submit(sleepJob({ ms: 1 }))).body.data;
    expect(plain).toMatchObject({ retention: null, purge_at: null });
    const a = await waitTerminal(svc.call, own.uuid);
    const b = await waitTerminal(svc.call, plain.uuid);
    // Counted from the end of the job: its own retention, else RESULT_RETENTION (7 days here).
    expect(Date.parse(a.purge_at) - Date.parse(a.finished_at)).toBe(90 * 60_000);
    expect(b.retention).toBeNull();
    expect(Date.parse(b.purge_at) - Date.parse(b.finished_at)).toBe(7 * 86_400_000);
    // A cancel answers the job with its purge time already set.
    const queued = (await submit(sleepJob({ ms: 120_000 }, { retention: '2d' }))).body.data;
    const cancelled = (await svc.call('POST', `/api/v1/jobs/${queued.uuid}/cancel`)).body.data;
    expect(cancelled.retention).toBe('2d');
    expect(Date.parse(cancelled.purge_at) - Date.parse(cancelled.finished_at)).toBe(2 * 86_400_000);
    // Once purged, there is nothing left to purge.
    const removed = (await svc.call('DELETE', `/api/v1/jobs/${queued.uuid}`)).body.data;
    expect(removed).toMatchObject({ data_removed: true, purge_at: null, retention: '2d' });
  });

  it('purges a job at the end of its retention by itself', async () => {
    const job = (await submit(sleepJob({ ms: 1 }, { retention: '1s' }))).body.data;
    await waitTerminal(svc.call, job.uuid);
    const link = (await svc.call('GET', `/api/v1/jobs/${job.uuid}/result`)).body.data;
    const gone = await waitFor(async () => {
      const s = await status(job.uuid);
      return s.data_removed ? s : undefined;
    }, 'the retention purge');
    expect(gone).toMatchObject({ status: 'completed', result_ready: false });
    expect((await svc.call('GET', `/api/v1/jobs/${job.uuid}/result`)).status).toBe(410);
    expect((await fetch(link.url)).status).not.toBe(200);
  });

  it('retries a purge the storage failed, never claiming data_removed while the blob is served', async () => {
    const job = (await submit(sleepJob({ ms: 1 }))).body.data;
    await waitTerminal(svc.call, job.uuid);
    const link = (await svc.call('GET', `/api/v1/jobs/${job.uuid}/result`)).body.data;
    storageDown = true;
    try {
      const del = await svc.call('DELETE', `/api/v1/jobs/${job.uuid}`);
      expect(del.status).toBe(503);
      // The blob is still there, so the job does not claim its data is removed; it is not handed out either.
      expect((await fetch(link.url)).status).toBe(200);
      expect(await status(job.uuid)).toMatchObject({ data_removed: false, result_ready: false });
      expect((await svc.call('GET', `/api/v1/jobs/${job.uuid}/result`)).status).toBe(410);
      const row = await svc.app.store.db
        .selectFrom('jobs')
        .select(['input'])
        .where('uuid', '=', job.uuid)
        .executeTakeFirstOrThrow();
      expect(row.input).toBe('{}');
      await sleep(1500); // housekeeping tries again and fails again
      expect((await status(job.uuid)).data_removed).toBe(false);
    } finally {
      storageDown = false;
    }
    await waitFor(async () => (await status(job.uuid)).data_removed === true, 'housekeeping to finish the purge');
    expect((await fetch(link.url)).status).not.toBe(200);
  });
});

describe('structured progress', () => {
  it('shows progress in the status and streams it at most every 500 ms, never in webhooks', async () => {
    const webhook = { url: rx.url('/progress') };
    const job = (
      await svc.call('POST', '/api/v1/jobs/submit/test-steps', {
        body: { job_type: 'test-steps', model: 'v1', input: { steps: 40, ms: 50 }, webhook },
      })
    ).body.data;
    expect(job.progress).toBeNull();
    const res = await fetch(`${svc.base}/api/v1/jobs/${job.uuid}/events`, {
      headers: { authorization: `Bearer ${svc.key}` },
    });
    const seen = await waitFor(async () => {
      const s = await status(job.uuid);
      return s.progress?.stage === 'stepping' ? s : undefined;
    }, 'progress in the status');
    expect(seen.progress).toMatchObject({ stage: 'stepping', total: 40 });
    expect(seen.progress.current).toBeGreaterThanOrEqual(1);
    expect(seen.progress.percent).toBeCloseTo((100 * seen.progress.current) / 40, 1);
    expect(seen.status_detail).toMatch(/^stepping \(\d+ of 40\)$/);

    const text = await res.text(); // the stream ends after the terminal status
    const events = text
      .split('\n\n')
      .filter((b) => b.includes('event: '))
      .map((b) => ({ event: /event: (\w+)/.exec(b)![1], data: JSON.parse(/data: (.*)/.exec(b)![1]!) }));
    const progress = events.filter((e) => e.event === 'progress' && e.data.progress !== null);
    expect(progress.length).toBeGreaterThanOrEqual(1);
    // 40 reports over about 2 s: the throttle lets through at most one per 500 ms.
    expect(progress.length).toBeLessThan(40 / 2);
    expect(events.at(-1)).toMatchObject({ event: 'status', data: { status: 'completed' } });
    // A finished job shows no progress (the last report may have been throttled away).
    expect(events.at(-1)!.data.progress).toBeNull();
    expect((await svc.call('GET', `/api/v1/jobs/${job.uuid}/status`)).body.data.progress).toBeNull();

    const [hook] = await waitFor(() => {
      const mine = rx.requests.filter((x) => x.json().job?.uuid === job.uuid);
      return mine.length > 0 ? mine : undefined;
    }, 'the job.completed webhook');
    expect(hook!.json().job).not.toHaveProperty('progress');
    expect(hook!.raw.toString()).not.toContain('stepping');
  });
});

describe('priority', () => {
  it("reorders an owner's own jobs and keeps the order between owners", async () => {
    const bob = await svc.newKey('bob');
    /** Submits alice a1 a2 a3 (a3 with `priority`) and bob b1 b2 behind a blocker; answers the run order. */
    const round = async (tag: number, priority: number) => {
      const blocker = await blockWorker();
      const ms = (n: number) => tag * 10 + n;
      await submit(sleepJob({ ms: ms(1) }));
      await submit(sleepJob({ ms: ms(2) }));
      await submit(sleepJob({ ms: ms(3) }, { priority }));
      for (const n of [4, 5]) {
        await svc.call('POST', '/api/v1/jobs/submit/test-sleep', { key: bob, body: sleepJob({ ms: ms(n) }) });
      }
      await unblock(blocker);
      const mine = (r: string) => Math.floor(Number(r) / 10) === tag;
      await waitFor(() => (runs.filter(mine).length >= 5 ? true : undefined), 'five jobs to run');
      await waitFor(() => (svc.app.workers!.activeJobs === 0 ? true : undefined), 'the worker to be idle');
      return runs.filter(mine).map((r) => Number(r) % 10);
    };
    const plain = await round(1, 0);
    const urgent = await round(2, 600);
    const owner = (n: number) => (n <= 3 ? 'alice' : 'bob');
    // The owners take turns exactly as before; within alice's turns, a3 comes first.
    expect(urgent.map(owner)).toEqual(plain.map(owner));
    expect(plain.filter((n) => n <= 3)).toEqual([1, 2, 3]);
    expect(urgent.filter((n) => n <= 3)).toEqual([3, 1, 2]);
    expect(urgent.filter((n) => n > 3)).toEqual([4, 5]);
    const job = (await submit(sleepJob({ ms: 1 }, { priority: -600 }))).body.data;
    expect(job.priority).toBe(-600);
  });
});

describe('batches', () => {
  const item = (n: number, extra: Record<string, unknown> = {}) => sleepJob({ ms: n }, extra);

  it('answers each item alone: mixed valid and invalid items, nothing created for the invalid ones', async () => {
    const r = await svc.call('POST', '/api/v1/jobs/batch', {
      body: {
        jobs: [
          item(1),
          { ...item(2), model: 'v9' },
          { job_type: 'no-such-type', model: 'v1', input: {} },
          item(3, { cancel_after: '0s' }),
          { model: 'v1', input: {} },
          item(4, { priority: 5 }),
        ],
      },
    });
    expect(r.status).toBe(200);
    const items = r.body.data.items;
    expect(items.map((i: { status: number }) => i.status)).toEqual([200, 400, 404, 400, 400, 200]);
    expect(items[1]).toEqual({ code: -1, message: 'model: must be "v1"', status: 400, data: {} });
    expect(items[3].message).toBe('cancel_after: must be between 1s and 7d');
    expect(items[4].message).toBe('job_type: is required');
    expect(items[0]).toMatchObject({ code: 0, message: 'ok', data: { status: 'queued', job_type: 'test-sleep' } });
    expect(items[5].data.priority).toBe(5);
    for (const i of [0, 5]) expect((await status(items[i].data.uuid)).uuid).toBe(items[i].data.uuid);
  });

  it('replays with KEY:INDEX keys and answers a changed item with its own 409', async () => {
    const body = { jobs: [item(1), item(2, { idempotency_key: 'own-key-2' }), item(3)] };
    const first = await svc.call('POST', '/api/v1/jobs/batch', { body, headers: { 'Idempotency-Key': 'batch-1' } });
    const uuids = first.body.data.items.map((i: { data: { uuid: string } }) => i.data.uuid);
    expect(new Set(uuids).size).toBe(3);
    const again = await svc.call('POST', '/api/v1/jobs/batch', { body, headers: { 'Idempotency-Key': 'batch-1' } });
    expect(again.body.data.items.map((i: { data: { uuid: string } }) => i.data.uuid)).toEqual(uuids);
    // Item 0 is the single submit with key batch-1:0; item 1 kept its own key.
    const single = await submit(item(1), { headers: { 'Idempotency-Key': 'batch-1:0' } });
    expect(single.headers.get('idempotent-replayed')).toBe('true');
    expect(single.body.data.uuid).toBe(uuids[0]);
    const own = await submit(item(2), { headers: { 'Idempotency-Key': 'own-key-2' } });
    expect(own.body.data.uuid).toBe(uuids[1]);

    const changed = { jobs: [item(1), item(2, { idempotency_key: 'own-key-2' }), item(99)] };
    const mixed = await svc.call('POST', '/api/v1/jobs/batch', {
      body: changed,
      headers: { 'Idempotency-Key': 'batch-1' },
    });
    expect(mixed.body.data.items.map((i: { status: number }) => i.status)).toEqual([200, 200, 409]);
    expect(mixed.body.data.items[2].message).toMatch(/^Idempotency-Key: already used with a different request/);

    // The same key twice in one batch: the first takes it, the second replays it.
    const twice = await svc.call('POST', '/api/v1/jobs/batch', {
      body: {
        jobs: [
          item(7, { idempotency_key: 'dup' }),
          item(7, { idempotency_key: 'dup' }),
          item(8, { idempotency_key: 'dup' }),
        ],
      },
    });
    const t = twice.body.data.items;
    expect(t.map((i: { status: number }) => i.status)).toEqual([200, 200, 409]);
    expect(t[1].data.uuid).toBe(t[0].data.uuid);
  });

  it('refuses 1,001 items and an empty batch whole', async () => {
    const big = await svc.call('POST', '/api/v1/jobs/batch', {
      body: { jobs: Array.from({ length: 1001 }, () => item(1)) },
    });
    expect(big.status).toBe(400);
    expect(big.body).toEqual({ code: -1, message: 'jobs: must have at most 1000 items', data: {} });
    const empty = await svc.call('POST', '/api/v1/jobs/batch', { body: { jobs: [] } });
    expect(empty.status).toBe(400);
    expect(empty.body.message).toBe('jobs: must have at least 1 item');
  });
});

/** Redis when it answers here (the shared counters); the process-memory store always. */
async function redisUp(): Promise<boolean> {
  const probe = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 1000 });
  probe.on('error', () => {});
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}
const REDIS_URL = 'redis://127.0.0.1:6379';
const stores: Array<{ store: string; env: Record<string, string> }> = [
  { store: 'memory', env: {} },
  ...((await redisUp()) ? [{ store: 'redis', env: { REDIS_URL, REDIS_KEY_PREFIX: `mj-test:${randomUUID()}:` } }] : []),
];

describe.each(stores)('rate limits count batch items ($store store)', ({ env }) => {
  let limited: TestService;
  beforeAll(async () => {
    limited = await startService(
      { RATE_LIMIT_SUBMIT: '10', WORKER_CONCURRENCY: '0', ...env },
      { jobTypes: [sleepJobType()] },
    );
  });
  afterAll(() => limited?.stop());

  it('counts each item as a submit and refuses a batch over what is left, whole', async () => {
    const batch = (n: number) =>
      limited.call('POST', '/api/v1/jobs/batch', {
        body: { jobs: Array.from({ length: n }, () => sleepJob({ ms: 1 })) },
      });
    expect((await batch(8)).status).toBe(200);
    const over = await batch(3);
    expect(over.status).toBe(429);
    expect(over.body.message).toMatch(/each item of a batch counts as one/);
    const one = () => limited.call('POST', '/api/v1/jobs/submit/test-sleep', { body: sleepJob({ ms: 1 }) });
    expect((await one()).status).toBe(200);
    expect((await one()).status).toBe(200);
    expect((await one()).status).toBe(429);
    const jobs = (await limited.call('GET', '/api/v1/jobs?limit=100')).body.data.jobs;
    expect(jobs).toHaveLength(10);
  });

  it('says what is left when it refuses a batch, and does not count a replayed batch again', async () => {
    const key = await limited.newKey(`replayer-${randomUUID()}`);
    const batch = (n: number, headers: Record<string, string> = {}) =>
      limited.call('POST', '/api/v1/jobs/batch', {
        key,
        headers,
        body: { jobs: Array.from({ length: n }, (_, i) => sleepJob({ ms: i + 1 })) },
      });
    const first = await batch(6, { 'idempotency-key': 'replayed-batch' });
    expect(first.status).toBe(200);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(first.headers.get('ratelimit')).toMatch(/^"submit";r=4;t=\d+$/);

    // A batch of 5 with 4 left: refused whole, and the headers say 4 are left (not 0).
    const over = await batch(5);
    expect(over.status).toBe(429);
    expect(over.headers.get('ratelimit')).toMatch(/^"submit";r=4;t=\d+$/);
    expect(over.headers.get('ratelimit-remaining')).toBe('4');

    // The same batch again: every item a replay, marked so, and nothing counted.
    for (let i = 0; i < 3; i++) {
      const again = await batch(6, { 'idempotency-key': 'replayed-batch' });
      expect(again.status, again.text).toBe(200);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.body.data.items.map((it: { data: { uuid: string } }) => it.data.uuid)).toEqual(
        first.body.data.items.map((it: { data: { uuid: string } }) => it.data.uuid),
      );
      expect(again.body.data.items.every((it: { replayed?: boolean }) => it.replayed === true)).toBe(true);
      expect(again.headers.get('ratelimit')).toMatch(/^"submit";r=4;t=\d+$/);
    }
    // Partly new: counted by its new items only (2 of 6), and not marked as a replay.
    const grown = await limited.call('POST', '/api/v1/jobs/batch', {
      key,
      headers: { 'idempotency-key': 'replayed-batch' },
      body: { jobs: Array.from({ length: 8 }, (_, i) => sleepJob({ ms: i + 1 })) },
    });
    expect(grown.status, grown.text).toBe(200);
    expect(grown.headers.get('idempotent-replayed')).toBeNull();
    expect(grown.body.data.items.map((it: { replayed?: boolean }) => it.replayed ?? false)).toEqual([
      ...Array<boolean>(6).fill(true),
      false,
      false,
    ]);
    expect(grown.headers.get('ratelimit')).toMatch(/^"submit";r=2;t=\d+$/);
  });
});
