import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MediaJobsClient, MediaJobsError, WaitTimeoutError } from '../../src/client/index.js';
import type { ApiJob } from '../../src/contract/api.js';
import { defaultJobTypes } from '../../src/processors/catalogue.js';
import { sleepJobType } from '../helpers/job-types.js';
import { startMediaServer, type MediaServer } from '../helpers/media-server.js';
import { freePort, startService, tempDir, type TestService } from '../helpers/service.js';

let svc: TestService;
let media: MediaServer;
let client: MediaJobsClient;
const dir = tempDir('mj-client-');

beforeAll(async () => {
  media = await startMediaServer();
  svc = await startService({}, { jobTypes: [...defaultJobTypes({ threads: 1 }), sleepJobType()] });
  client = new MediaJobsClient({ baseUrl: svc.base, apiKey: svc.key, retryDelayMs: 20 });
});
afterAll(async () => {
  await svc?.stop();
  await media?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

interface Seen {
  url: string;
  method: string;
  headers: Headers;
}

/** The URL of a fetch's first argument, whichever form it takes. */
const urlOf = (input: string | URL | Request) =>
  typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;

/** A fetch that records requests and lets a test answer some of them itself. */
function spyFetch(intercept?: (n: number, req: Seen) => Response | 'throw' | 'lose' | undefined) {
  const seen: Seen[] = [];
  const f: typeof fetch = async (input, init) => {
    const req: Seen = { url: urlOf(input), method: init?.method ?? 'GET', headers: new Headers(init?.headers) };
    seen.push(req);
    const action = intercept?.(seen.length, req);
    if (action === 'throw')
      throw new TypeError('fetch failed', {
        cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }),
      });
    if (action === 'lose') {
      // The server gets and handles the request; the answer is lost on the way back.
      await fetch(input, init).then((r) => r.text());
      throw new TypeError('fetch failed', {
        cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }),
      });
    }
    if (action) return action;
    return fetch(input, init);
  };
  return { fetch: f, seen };
}

const envelope = (status: number, message: string, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify({ code: -1, message, data: {} }), {
    status,
    headers: { 'content-type': 'application/json', ...headers },
  });

const sleepBody = (ms: number) => ({ model: 'v1', input: { ms } });

describe('MediaJobsClient against a real service', () => {
  it('submits, waits, gets the result link and downloads an image', async () => {
    const job = await client.submit('image-transform', {
      model: 'lanczos3',
      input: { source: media.url('/photo.jpg'), width: 512, format: 'webp' },
    });
    expect(job).toMatchObject({
      job_type: 'image-transform',
      model: 'lanczos3',
      status: 'queued',
      result_ready: false,
    });

    const updates: ApiJob[] = [];
    const done = await client.wait(job.uuid, { timeoutMs: 60_000, onUpdate: (j) => updates.push(j) });
    expect(done).toMatchObject({ uuid: job.uuid, status: 'completed', result_ready: true, error_type: null });
    expect(updates.length).toBeGreaterThanOrEqual(1);
    expect(updates.at(-1)).toEqual(done);

    const link = await client.result(job.uuid);
    expect(link).toMatchObject({ uuid: job.uuid, content_type: 'image/webp' });
    expect(link.size_bytes).toBeGreaterThan(0);

    const file = path.join(dir, 'out.webp');
    const saved = await client.download(job.uuid, file);
    expect(saved).toMatchObject({ path: file, content_type: 'image/webp', size_bytes: link.size_bytes });
    expect(fs.statSync(file).size).toBe(link.size_bytes);
    expect(await sharp(file).metadata()).toMatchObject({ format: 'webp', width: 512, height: 384 });
    expect(fs.readdirSync(dir).filter((f) => f.endsWith('.part'))).toEqual([]);
  });

  it('returns a failed job from wait (it does not throw)', async () => {
    const job = await client.submit('image-transform', {
      model: 'lanczos3',
      input: { source: media.url('/missing.jpg') },
    });
    const done = await client.wait(job.uuid, { timeoutMs: 60_000 });
    expect(done).toMatchObject({ status: 'failed', error_type: 'media_fetch_failed', result_ready: false });
    const err = await client.result(job.uuid).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MediaJobsError);
    expect(err).toMatchObject({ status: 409, message: 'job is failed; it has no result' });
  });

  it('sends an Idempotency-Key: the same key returns the same job', async () => {
    const body = sleepBody(0);
    const key = `client-test-${Date.now()}`;
    const a = await client.submit('test-sleep', body, { idempotencyKey: key });
    const b = await client.submit('test-sleep', body, { idempotencyKey: key });
    expect(b.uuid).toBe(a.uuid);
    // A different body under the same key is a 409.
    const err = await client.submit('test-sleep', sleepBody(1), { idempotencyKey: key }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 409 });
  });

  it('retries a submit whose response was lost with the same key, so only one job is made', async () => {
    const spy = spyFetch((n) => (n === 1 ? 'lose' : undefined));
    const c = new MediaJobsClient({ baseUrl: svc.base, apiKey: svc.key, fetch: spy.fetch, retryDelayMs: 20 });
    const job = await c.submit('test-sleep', sleepBody(0));
    expect(spy.seen).toHaveLength(2);
    const keys = spy.seen.map((s) => s.headers.get('idempotency-key'));
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(keys[1]).toBe(keys[0]);
    // The second attempt was a replay of the first: the job the server made the first time.
    const all = await client.listJobs({ jobType: 'test-sleep', limit: 100 });
    expect(all.jobs.filter((j) => j.uuid === job.uuid)).toHaveLength(1);
    expect((await client.status(job.uuid)).uuid).toBe(job.uuid);
  });

  it('retries 5xx and 429 (honouring Retry-After), but not other 4xx', async () => {
    const spy = spyFetch((n) =>
      n === 1 ? envelope(503, 'busy') : n === 2 ? envelope(429, 'slow down', { 'retry-after': '1' }) : undefined,
    );
    const c = new MediaJobsClient({ baseUrl: svc.base, apiKey: svc.key, fetch: spy.fetch, retryDelayMs: 20 });
    const started = Date.now();
    const types = await c.jobTypes();
    expect(types.map((t) => t.name)).toContain('image-transform');
    expect(spy.seen).toHaveLength(3);
    expect(Date.now() - started).toBeGreaterThanOrEqual(950); // Retry-After: 1 was honoured

    const spy4 = spyFetch();
    const c4 = new MediaJobsClient({ baseUrl: svc.base, apiKey: svc.key, fetch: spy4.fetch, retryDelayMs: 20 });
    await expect(c4.status('00000000-0000-4000-8000-000000000000')).rejects.toMatchObject({ status: 404 });
    expect(spy4.seen).toHaveLength(1);
  });

  it('gives up after its retries with the last error', async () => {
    const spy = spyFetch(() => envelope(500, 'internal error', { 'x-request-id': 'req-1' }));
    const c = new MediaJobsClient({
      baseUrl: svc.base,
      apiKey: svc.key,
      fetch: spy.fetch,
      retries: 2,
      retryDelayMs: 10,
    });
    const err = (await c.jobTypes().catch((e: unknown) => e)) as MediaJobsError;
    expect(err).toBeInstanceOf(MediaJobsError);
    expect(err).toMatchObject({ status: 500, message: 'internal error', requestId: 'req-1' });
    expect(spy.seen).toHaveLength(3);
  });

  it('carries the HTTP status, the envelope message and the request id in its errors', async () => {
    const notFound = (await client
      .status('00000000-0000-4000-8000-000000000000')
      .catch((e: unknown) => e)) as MediaJobsError;
    expect(notFound).toBeInstanceOf(MediaJobsError);
    expect(notFound).toMatchObject({ name: 'MediaJobsError', status: 404, message: 'job not found' });
    expect(notFound.requestId).toBeTruthy();

    const badModel = (await client
      .submit('image-transform', { model: 'bicubic', input: { source: media.url('/photo.jpg') } })
      .catch((e: unknown) => e)) as MediaJobsError;
    expect(badModel).toMatchObject({ status: 400 });
    expect(badModel.message).toMatch(/^model: must be one of "lanczos3"/);

    const unknownType = await client.submit('no-such-type', { model: 'x', input: {} }).catch((e: unknown) => e);
    expect(unknownType).toMatchObject({ status: 404 });

    const stranger = new MediaJobsClient({ baseUrl: svc.base, apiKey: 'mj_not_a_real_key', retryDelayMs: 10 });
    const unauthorized = (await stranger.jobTypes().catch((e: unknown) => e)) as MediaJobsError;
    expect(unauthorized).toMatchObject({ status: 401, message: 'invalid or revoked API key' });
  });

  it('reports a network failure as status 0 after retrying', async () => {
    const port = await freePort(); // nothing listens there
    const c = new MediaJobsClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: 'k', retries: 1, retryDelayMs: 10 });
    const err = (await c.jobTypes().catch((e: unknown) => e)) as MediaJobsError;
    expect(err).toBeInstanceOf(MediaJobsError);
    expect(err.status).toBe(0);
    expect(err.message).toMatch(/ECONNREFUSED/);
  });

  it('times out a request that gets no answer', async () => {
    const sockets: net.Socket[] = [];
    const silent = net.createServer((s) => sockets.push(s));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    try {
      const { port } = silent.address() as net.AddressInfo;
      const c = new MediaJobsClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: 'k', retries: 0, timeoutMs: 300 });
      const err = (await c.jobTypes().catch((e: unknown) => e)) as MediaJobsError;
      expect(err).toMatchObject({ status: 0 });
      expect(err.message).toMatch(/timed out after 300 ms/);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((r) => silent.close(r));
    }
  });

  it('cancels a running job; cancelling it again is a 409', async () => {
    const job = await client.submit('test-sleep', sleepBody(60_000));
    const cancelled = await client.cancel(job.uuid);
    expect(cancelled).toMatchObject({ uuid: job.uuid, status: 'cancelled' });
    expect(await client.wait(job.uuid, { timeoutMs: 30_000 })).toMatchObject({ status: 'cancelled' });
    await expect(client.cancel(job.uuid)).rejects.toMatchObject({ status: 409 });
  });

  it('submits with cancelAfter, priority and retention, submits batches, deletes, and watches progress', async () => {
    const job = await client.submit('test-sleep', sleepBody(1), { cancelAfter: '5m', priority: 60, retention: '1h' });
    expect(job.priority).toBe(60);
    expect(Date.parse(job.deadline!) - Date.parse(job.created_at)).toBe(300_000);
    const events = [];
    for await (const e of client.watch(job.uuid)) events.push(e);
    expect(events.at(-1)).toMatchObject({ type: 'status', job: { status: 'completed' } });
    expect(events.some((e) => e.progress?.stage === 'sleeping')).toBe(
      events.some((e) => e.job.status === 'processing'),
    );
    const gone = await client.delete(job.uuid);
    expect(gone).toMatchObject({ uuid: job.uuid, data_removed: true, result_ready: false });
    await expect(client.result(job.uuid)).rejects.toMatchObject({ status: 410 });

    const items = [
      { job_type: 'test-sleep', ...sleepBody(1) },
      { job_type: 'test-sleep', model: 'v9', input: { ms: 1 } },
    ];
    const first = await client.submitBatch(items, { idempotencyKey: 'client-batch-1' });
    expect(first.map((i) => i.status)).toEqual([200, 400]);
    const again = await client.submitBatch(items, { idempotencyKey: 'client-batch-1' });
    expect('uuid' in again[0]!.data && again[0]!.data.uuid).toBe('uuid' in first[0]!.data && first[0]!.data.uuid);
  });

  it('treats a cancel whose answer was lost as done when the retry finds the job cancelled', async () => {
    const job = await client.submit('test-sleep', sleepBody(60_000));
    const spy = spyFetch((n) => (n === 1 ? 'lose' : undefined));
    const c = new MediaJobsClient({ baseUrl: svc.base, apiKey: svc.key, fetch: spy.fetch, retryDelayMs: 20 });
    expect(await c.cancel(job.uuid)).toMatchObject({ uuid: job.uuid, status: 'cancelled' });
  });

  it('times out a wait with the last state seen', async () => {
    const job = await client.submit('test-sleep', sleepBody(60_000));
    try {
      const err = (await client.wait(job.uuid, { timeoutMs: 1_500 }).catch((e: unknown) => e)) as WaitTimeoutError;
      expect(err).toBeInstanceOf(WaitTimeoutError);
      expect(err.job?.uuid).toBe(job.uuid);
      expect(['queued', 'processing']).toContain(err.job?.status);
    } finally {
      await client.cancel(job.uuid);
    }
  });

  it('long-polls with ?wait= and falls back to polling when the server does not long-poll', async () => {
    // Long poll: status requests after the first carry wait=.
    const spy = spyFetch();
    const c = new MediaJobsClient({ baseUrl: svc.base, apiKey: svc.key, fetch: spy.fetch });
    const job = await c.submit('test-sleep', sleepBody(1_500));
    expect((await c.wait(job.uuid, { timeoutMs: 60_000 })).status).toBe('completed');
    const polls = spy.seen.filter((s) => s.url.includes('/status'));
    expect(polls.some((s) => new URL(s.url).searchParams.has('wait'))).toBe(true);

    // A server that rejects the parameter: the client polls without it.
    const strict = spyFetch((_n, req) =>
      new URL(req.url).searchParams.has('wait') ? envelope(400, 'wait: unknown field') : undefined,
    );
    const c2 = new MediaJobsClient({ baseUrl: svc.base, apiKey: svc.key, fetch: strict.fetch });
    const job2 = await c2.submit('test-sleep', sleepBody(1_000));
    expect((await c2.wait(job2.uuid, { timeoutMs: 60_000, pollIntervalMs: 100 })).status).toBe('completed');

    // A server that ignores it (answers at once): detected, then plain polling with backoff.
    let stripped = 0;
    const rewriting: typeof fetch = async (input, init) => {
      const u = new URL(urlOf(input));
      if (u.searchParams.has('wait')) stripped++;
      u.searchParams.delete('wait');
      return fetch(u, init);
    };
    const c3 = new MediaJobsClient({ baseUrl: svc.base, apiKey: svc.key, fetch: rewriting });
    const job3 = await c3.submit('test-sleep', sleepBody(3_000));
    let updates = 0;
    const done3 = await c3.wait(job3.uuid, {
      timeoutMs: 60_000,
      pollIntervalMs: 100,
      longPollSeconds: 5,
      onUpdate: () => updates++,
    });
    expect(done3.status).toBe('completed');
    // It stopped sending wait= after two answers that came at once with nothing new (answers that
    // brought a change do not count). A loaded machine may finish the job sooner: an upper bound.
    expect(stripped).toBeLessThanOrEqual(updates + 2);
    // And it remembers: this client no longer asks for long polls.
    const job4 = await c3.submit('test-sleep', sleepBody(500));
    const before = stripped;
    expect((await c3.wait(job4.uuid, { timeoutMs: 60_000, pollIntervalMs: 100 })).status).toBe('completed');
    expect(stripped).toBe(before);
  });

  it('lists jobs with filters and cursors', async () => {
    const other = new MediaJobsClient({ baseUrl: svc.base, apiKey: await svc.newKey('lister'), retryDelayMs: 10 });
    const made: string[] = [];
    for (let i = 0; i < 5; i++) made.push((await other.submit('test-sleep', sleepBody(0))).uuid);
    const first = await other.listJobs({ limit: 2 });
    expect(first.jobs).toHaveLength(2);
    expect(first.next_cursor).toEqual(expect.any(String));
    const seen: string[] = [];
    for await (const j of other.iterateJobs({ limit: 2, jobType: 'test-sleep' })) seen.push(j.uuid);
    expect(seen.sort()).toEqual([...made].sort());
    expect((await other.listJobs({ jobType: 'image-transform' })).jobs).toEqual([]);
    const cancelled = await other.listJobs({ status: 'cancelled' });
    expect(cancelled).toEqual({ jobs: [], next_cursor: null });
  });

  it('accepts a base URL with /api/v1 and a trailing slash', async () => {
    const c = new MediaJobsClient({ baseUrl: `${svc.base}/api/v1/`, apiKey: svc.key });
    expect(c.baseUrl).toBe(svc.base);
    expect((await c.jobTypes()).length).toBeGreaterThan(0);
    expect(() => new MediaJobsClient({ baseUrl: 'ftp://x', apiKey: 'k' })).toThrow(/http or https/);
  });
});
