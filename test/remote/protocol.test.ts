import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDeclaredTypes } from '../../src/remote/declared-types.js';
import { createWorkerToken, revokeWorkerToken } from '../../src/store/worker-tokens.js';
import { startMediaServer, type MediaServer } from '../helpers/media-server.js';
import { startReceiver, type Receiver } from '../webhooks/receiver.js';
import { startService, waitFor, type TestService } from '../helpers/service.js';
import { declaredTypesFile, DECLARED } from './support.js';

/**
 * The remote worker protocol over real HTTP, with raw calls (no SDK): what a worker in any
 * language sees. docs/workers.md is the contract.
 */
let svc: TestService;
let media: MediaServer;
let receiver: Receiver;
let token: string;
let tokenB: string;

beforeAll(async () => {
  media = await startMediaServer();
  receiver = await startReceiver();
  svc = await startService({
    JOB_TYPES_FILE: declaredTypesFile(),
    JOB_LEASE: '4s',
    WORKER_MEDIA_URL_TTL: '4s',
    WORKER_MAX_OUTPUT_BYTES: '100000',
    RATE_LIMIT_SUBMIT: '0',
    RATE_LIMIT_READ: '0',
  });
  token = (await createWorkerToken(svc.app.store.db, { name: 'all', jobTypes: null }, Date.now())).token;
  tokenB = (await createWorkerToken(svc.app.store.db, { name: 'only-b', jobTypes: ['test-remote-b'] }, Date.now()))
    .token;
});
afterAll(async () => {
  await svc?.stop();
  await media?.close();
  await receiver?.close();
});

const w = (method: string, url: string, body?: unknown, key = token) =>
  svc.call(method, `/api/v1/worker${url}`, { key, body });
const submit = (jobType: string, input: Record<string, unknown>, webhook?: string) =>
  svc
    .call('POST', `/api/v1/jobs/submit/${jobType}`, {
      body: {
        job_type: jobType,
        model: 'v1',
        input,
        ...(webhook ? { webhook: { url: webhook, secret: 's3cret' } } : {}),
      },
    })
    .then((r) => {
      expect(r.status, r.text).toBe(200);
      return r.body.data.uuid as string;
    });
const status = async (uuid: string) => (await svc.call('GET', `/api/v1/jobs/${uuid}/status`)).body.data;

/** Another test's leftover: cancelled, so it never stands in front of this test's job again. */
const drop = (job: { uuid: string }) => svc.call('POST', `/api/v1/jobs/${job.uuid}/cancel`);

/** Claims until the job with this uuid comes (other tests' leftovers are released). */
async function claimJob(uuid: string, jobTypes = ['test-remote', 'test-remote-b', 'test-remote-quick']): Promise<any> {
  return waitFor(async () => {
    const r = await w('POST', '/claim', { job_types: jobTypes, wait: 1 });
    expect(r.status, r.text).toBe(200);
    const job = r.body.data.job;
    if (job && job.uuid !== uuid) await drop(job);
    return job?.uuid === uuid ? job : undefined;
  }, `a claim of ${uuid}`);
}

async function upload(uuid: string, lease: string, bytes: Buffer, type: string) {
  const res = await fetch(`${svc.base}/api/v1/worker/jobs/${uuid}/output?lease_token=${encodeURIComponent(lease)}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${token}`, 'content-type': type },
    body: new Uint8Array(bytes),
  });
  return { status: res.status, body: await res.json() };
}

describe('declared job types', () => {
  it('list, validate and appear in the OpenAPI document like built-in types', async () => {
    const types = await svc.call('GET', '/api/v1/job-types');
    const remote = types.body.data.job_types.find((t: any) => t.name === 'test-remote');
    expect(remote).toMatchObject({
      submit_path: '/api/v1/jobs/submit/test-remote',
      slots: { source: { accepts: 'image', max: 2 } },
    });
    expect(remote.options.properties.scale).toMatchObject({ type: 'integer', maximum: 4 });
    const bad = await svc.call('POST', '/api/v1/jobs/submit/test-remote', {
      body: { job_type: 'test-remote', model: 'v1', input: { source: media.url('/photo.jpg'), scale: 9 } },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toContain('scale');
    const doc = await (await fetch(`${svc.base}/api/v1/openapi.json`)).json();
    expect(Object.keys(doc.paths)).toContain('/api/v1/jobs/submit/test-remote');
    expect(doc.paths['/api/v1/worker/claim'].post.security).toEqual([{ workerToken: [] }]);
    // Accepted while no worker is connected: it waits in the queue, and no in-process worker takes it.
    const uuid = await submit('test-remote-b', { text: 'hi' });
    await new Promise((r) => setTimeout(r, 500));
    expect((await status(uuid)).status).toBe('queued');
    await svc.call('POST', `/api/v1/jobs/${uuid}/cancel`);
  });

  it('refuses a bad declaration with one line naming the field', () => {
    const withSlotOption = structuredClone(DECLARED);
    (withSlotOption.job_types[1]!.options as any).properties.source = { type: 'string' };
    expect(() => parseDeclaredTypes(withSlotOption)).toThrow(/job_types\.1\.options: "source" is a media slot name/);
    expect(() => parseDeclaredTypes({ job_types: [{ ...DECLARED.job_types[1], name: 'Bad Name' }] })).toThrow(
      /job_types\.0\.name/,
    );
    expect(() => parseDeclaredTypes({ job_types: [{ ...DECLARED.job_types[1], timeout: 'soon' }] })).toThrow(/timeout/);
    expect(() =>
      parseDeclaredTypes({ job_types: [{ ...DECLARED.job_types[1], options: { type: 'string' } }] }),
    ).toThrow(/options/);
  });
});

describe('tokens', () => {
  it('keeps API keys and worker tokens apart, and honours revoke and job-type limits', async () => {
    const withKey = await w('POST', '/claim', {}, svc.key);
    expect(withKey.status).toBe(401);
    expect(withKey.body).toMatchObject({ code: -1 });
    expect((await w('POST', '/claim', {}, 'mjw_not-a-real-token')).status).toBe(401);
    const onPublic = await svc.call('GET', '/api/v1/jobs', { key: token });
    expect(onPublic.status).toBe(401);
    expect(onPublic.body.message).toContain('worker token');

    expect((await w('POST', '/claim', { job_types: ['test-remote'] }, tokenB)).status).toBe(403);
    expect((await w('POST', '/claim', { job_types: ['image-transform'] })).status).toBe(400);
    const empty = await w('POST', '/claim', { wait: 0.2 }, tokenB);
    expect(empty.status).toBe(200);
    expect(empty.body.data).toEqual({ job: null });

    const t = await createWorkerToken(svc.app.store.db, { name: 'temp', jobTypes: null }, Date.now());
    expect((await w('POST', '/claim', {}, t.token)).status).toBe(200);
    await revokeWorkerToken(svc.app.store.db, t.id, Date.now());
    expect((await w('POST', '/claim', {}, t.token)).status).toBe(401);
  });
});

describe('a remote job end to end', () => {
  it('stages inputs, shows progress, takes the output and completes with the result and webhook rules', async () => {
    // The long poll is waiting before the submit: the job-queued signal wakes it.
    const polling = w('POST', '/claim', { job_types: ['test-remote'], wait: 20 });
    await new Promise((r) => setTimeout(r, 200));
    const uuid = await submit('test-remote', { source: media.url('/photo.jpg'), scale: 3 }, receiver.url('/done'));
    const claimed = await polling;
    expect(claimed.status, claimed.text).toBe(200);
    const job = claimed.body.data.job;
    expect(job).toMatchObject({ uuid, job_type: 'test-remote', model: 'v1', attempt: 1, input: { scale: 3 } });
    expect(Date.parse(job.lease_expires_at)).toBeGreaterThan(Date.now());

    // The staged copy is the client's bytes, on the service's signed URL (not the client's URL).
    const [staged] = job.input.source;
    expect(new URL(staged).port).toBe(new URL(svc.base).port);
    expect(new URL(staged).pathname).toMatch(/^\/results\//);
    const original = Buffer.from(await (await fetch(media.url('/photo.jpg'))).arrayBuffer());
    const copy = await fetch(staged);
    expect(copy.status).toBe(200);
    expect(Buffer.from(await copy.arrayBuffer()).equals(original)).toBe(true);
    const tampered = await fetch(
      staged.replace(/signature=(.)/, (_m: string, c: string) => `signature=${c === 'A' ? 'B' : 'A'}`),
    );
    expect(tampered.status).toBe(403);

    const hb = await w('POST', `/jobs/${uuid}/heartbeat`, {
      lease_token: job.lease_token,
      status_detail: 'upscaling',
      progress: 0.5,
    });
    expect(hb.status, hb.text).toBe(200);
    expect(hb.body.data.cancel_requested).toBe(false);
    expect(await status(uuid)).toMatchObject({
      status: 'processing',
      status_detail: 'upscaling (50%)',
      progress: { stage: 'upscaling', percent: 50 },
    });
    // The contract's structured progress, with counts.
    const structured = await w('POST', `/jobs/${uuid}/heartbeat`, {
      lease_token: job.lease_token,
      progress: { stage: 'tiles', percent: null, current: 3, total: 12 },
    });
    expect(structured.status, structured.text).toBe(200);
    expect(await status(uuid)).toMatchObject({
      status_detail: 'tiles (3 of 12)',
      progress: { stage: 'tiles', percent: 25, current: 3, total: 12 },
    });
    const bad = await w('POST', `/jobs/${uuid}/heartbeat`, {
      lease_token: job.lease_token,
      progress: { stage: 'tiles', percent: 101 },
    });
    expect(bad.status).toBe(400);

    expect((await w('POST', `/jobs/${uuid}/complete`, { lease_token: job.lease_token })).status).toBe(400); // no output yet
    expect(
      (await upload(uuid, job.lease_token, Buffer.from('not media at all'), 'application/octet-stream')).status,
    ).toBe(415);
    expect((await upload(uuid, 'r.wrong', Buffer.from('{}'), 'application/json')).status).toBe(409);
    const out = await sharp({ create: { width: 32, height: 16, channels: 3, background: '#123' } })
      .png()
      .toBuffer();
    const put = await upload(uuid, job.lease_token, out, 'application/octet-stream');
    expect(put.status).toBe(200);
    expect(put.body.data).toEqual({ content_type: 'image/png', size: out.length });
    expect((await w('POST', `/jobs/${uuid}/complete`, { lease_token: 'r.someone-else' })).status).toBe(409);
    const done = await w('POST', `/jobs/${uuid}/complete`, { lease_token: job.lease_token });
    expect(done.status, done.text).toBe(200);

    expect(await status(uuid)).toMatchObject({ status: 'completed', result_ready: true });
    const link = await svc.call('GET', `/api/v1/jobs/${uuid}/result`);
    expect(link.body.data.content_type).toBe('image/png');
    const result = Buffer.from(await (await fetch(link.body.data.url)).arrayBuffer());
    expect(result.equals(out)).toBe(true);
    // The webhook, as for any job: signed, with the terminal state.
    const [hook] = await receiver.waitForCount(1, 'the job.completed webhook');
    expect(hook!.headers['x-service-signature']).toBeTruthy();
    expect(hook!.json()).toMatchObject({
      event_type: 'job.completed',
      job: { uuid, status: 'completed', result_ready: true },
    });
    // The attempt is over: its staged input is deleted, and every later call is a 409.
    expect((await fetch(staged)).status).toBe(410);
    expect(
      await svc.app.store.db.selectFrom('staged_blobs').select('key').where('job_uuid', '=', uuid).execute(),
    ).toEqual([]);
    expect((await w('POST', `/jobs/${uuid}/heartbeat`, { lease_token: job.lease_token })).status).toBe(409);
    expect(
      (
        await w('POST', `/jobs/${uuid}/fail`, {
          lease_token: job.lease_token,
          error_type: 'processing_error',
          error_message: 'late',
        })
      ).status,
    ).toBe(409);
    expect((await status(uuid)).status).toBe('completed');
  });

  it('takes a JSON output when the worker declares it and it parses', async () => {
    const uuid = await submit('test-remote-b', { text: 'count me' });
    const job = await claimJob(uuid, ['test-remote-b']);
    expect((await upload(uuid, job.lease_token, Buffer.from('{"words": 2'), 'application/json')).status).toBe(415);
    const big = await upload(uuid, job.lease_token, Buffer.alloc(100_001, 0x20), 'text/plain');
    expect(big.status).toBe(413);
    expect(big.body.message).toContain('100000');
    expect((await upload(uuid, job.lease_token, Buffer.from('{"words": 2}'), 'application/json')).status).toBe(200);
    expect((await w('POST', `/jobs/${uuid}/complete`, { lease_token: job.lease_token })).status).toBe(200);
    const link = await svc.call('GET', `/api/v1/jobs/${uuid}/result`);
    expect(link.body.data.content_type).toBe('application/json');
    expect(await (await fetch(link.body.data.url)).json()).toEqual({ words: 2 });
  });
});

describe('the lease rules of a remote job', () => {
  it('cancels a running remote job at its deadline and tells the worker on its next heartbeat', async () => {
    const r = await svc.call('POST', '/api/v1/jobs/submit/test-remote-b', {
      body: { job_type: 'test-remote-b', model: 'v1', input: { text: 'too slow' } },
      headers: { 'Cancel-After': '2s' },
    });
    expect(r.status, r.text).toBe(200);
    const uuid = r.body.data.uuid as string;
    const job = await claimJob(uuid, ['test-remote-b']);
    const ended = await waitFor(async () => {
      const s = await status(uuid);
      return s.status === 'cancelled' ? s : undefined;
    }, 'the deadline to cancel the running job');
    expect(ended.status_detail).toBe('deadline passed while processing');
    const hb = await w('POST', `/jobs/${uuid}/heartbeat`, { lease_token: job.lease_token });
    expect(hb.status).toBe(200);
    expect(hb.body.data.cancel_requested).toBe(true);
  });

  it('tells the worker of a cancel on its next heartbeat, then refuses its calls', async () => {
    const uuid = await submit('test-remote', { source: media.url('/small.png') });
    const job = await claimJob(uuid);
    expect((await svc.call('POST', `/api/v1/jobs/${uuid}/cancel`)).status).toBe(200);
    const hb = await w('POST', `/jobs/${uuid}/heartbeat`, { lease_token: job.lease_token });
    expect(hb.status).toBe(200);
    expect(hb.body.data.cancel_requested).toBe(true);
    expect((await fetch(job.input.source[0])).status).toBe(410); // staged copy deleted
    expect((await w('POST', `/jobs/${uuid}/complete`, { lease_token: job.lease_token })).status).toBe(409);
    expect((await status(uuid)).status).toBe('cancelled');
  });

  it('fails with the error type, or retries when the worker says it may succeed', async () => {
    const uuid = await submit('test-remote-b', { text: 'x' }, receiver.url('/failed'));
    const first = await claimJob(uuid, ['test-remote-b']);
    const retry = await w('POST', `/jobs/${uuid}/fail`, {
      lease_token: first.lease_token,
      error_type: 'processing_error',
      error_message: 'GPU out of memory',
      retryable: true,
    });
    expect(retry.status).toBe(200);
    expect(retry.body.data.status).toBe('queued');
    expect((await status(uuid)).status_detail).toContain('GPU out of memory');
    const second = await claimJob(uuid, ['test-remote-b']);
    expect(second.attempt).toBe(2);
    expect(
      (
        await w('POST', `/jobs/${uuid}/fail`, {
          lease_token: first.lease_token,
          error_type: 'processing_error',
          error_message: 'stale',
        })
      ).status,
    ).toBe(409);
    const failed = await w('POST', `/jobs/${uuid}/fail`, {
      lease_token: second.lease_token,
      error_type: 'invalid_media',
      error_message: 'no face in the source',
    });
    expect(failed.body.data.status).toBe('failed');
    expect(await status(uuid)).toMatchObject({
      status: 'failed',
      error_type: 'invalid_media',
      error_message: 'no face in the source',
    });
    const hook = await waitFor(() => receiver.requests.find((r) => r.path === '/failed'), 'the job.failed webhook');
    expect(hook.json()).toMatchObject({
      event_type: 'job.failed',
      job: { uuid, status: 'failed', error_type: 'invalid_media', error_message: 'no face in the source' },
    });
    const badType = await w('POST', `/jobs/${uuid}/fail`, {
      lease_token: second.lease_token,
      error_type: 'oops',
      error_message: 'x',
    });
    expect(badType.status).toBe(400);
  });

  it('hands a released job back without counting the attempt', async () => {
    const uuid = await submit('test-remote-b', { text: 'y' });
    const first = await claimJob(uuid, ['test-remote-b']);
    expect((await w('POST', `/jobs/${uuid}/release`, { lease_token: first.lease_token })).status).toBe(200);
    expect((await status(uuid)).status).toBe('queued');
    const again = await claimJob(uuid, ['test-remote-b']);
    expect(again.attempt).toBe(1);
    expect(again.lease_token).not.toBe(first.lease_token);
    await w('POST', `/jobs/${uuid}/release`, { lease_token: again.lease_token });
    await svc.call('POST', `/api/v1/jobs/${uuid}/cancel`);
  });

  it('gives a job whose worker went silent to another worker; the first one gets 409', async () => {
    const uuid = await submit('test-remote-b', { text: 'z' });
    const first = await claimJob(uuid, ['test-remote-b']);
    // No heartbeat: the 4 s lease runs out and the job is queued again.
    await waitFor(async () => (await status(uuid)).status === 'queued', 'the lease to expire', 60_000);
    const second = await claimJob(uuid, ['test-remote-b']);
    expect(second.attempt).toBe(2);
    expect((await w('POST', `/jobs/${uuid}/heartbeat`, { lease_token: first.lease_token })).status).toBe(409);
    expect((await upload(uuid, second.lease_token, Buffer.from('"ok"'), 'application/json')).status).toBe(200);
    expect((await w('POST', `/jobs/${uuid}/complete`, { lease_token: first.lease_token })).status).toBe(409);
    expect((await w('POST', `/jobs/${uuid}/complete`, { lease_token: second.lease_token })).status).toBe(200);
    expect((await status(uuid)).status).toBe('completed');
  }, 90_000);

  it("fails a job that runs past its type's timeout", async () => {
    const uuid = await submit('test-remote-quick', {});
    const job = await claimJob(uuid, ['test-remote-quick']);
    await new Promise((r) => setTimeout(r, 1_300));
    const hb = await w('POST', `/jobs/${uuid}/heartbeat`, { lease_token: job.lease_token });
    expect(hb.body.data.cancel_requested).toBe(true);
    expect(await status(uuid)).toMatchObject({ status: 'failed', error_type: 'timeout' });
  });

  it('fails a job whose media cannot be fetched without handing it to the worker', async () => {
    const bad = await submit('test-remote', { source: media.url('/missing.jpg') });
    const wrongKind = await submit('test-remote', { source: media.url('/page.html') });
    await waitFor(async () => {
      const r = await w('POST', '/claim', { job_types: ['test-remote'], wait: 0.5 });
      const job = r.body.data.job;
      if (job) {
        expect([bad, wrongKind]).not.toContain(job.uuid);
        await drop(job);
      }
      return (await status(bad)).status === 'failed' && (await status(wrongKind)).status === 'failed';
    }, 'both jobs to fail at staging');
    expect(await status(bad)).toMatchObject({ status: 'failed', error_type: 'media_fetch_failed' });
    expect(await status(wrongKind)).toMatchObject({ status: 'failed', error_type: 'invalid_media' });
  });

  it('stages input URLs that expire', async () => {
    const uuid = await submit('test-remote', { source: media.url('/small.png') });
    const job = await claimJob(uuid);
    const url = new URL(job.input.source[0]);
    const expires = Number(url.searchParams.get('expires'));
    expect(expires * 1000).toBeLessThanOrEqual(Date.now() + 5_000);
    await waitFor(() => Date.now() > expires * 1000 + 1_000, 'the staged URL to expire', 10_000);
    expect((await fetch(url)).status).toBe(403);
    await w('POST', `/jobs/${uuid}/release`, { lease_token: job.lease_token });
    await svc.call('POST', `/api/v1/jobs/${uuid}/cancel`);
  });
});

describe('concurrent claimers', () => {
  it('never hand one job to two workers', async () => {
    const uuids = new Set<string>();
    for (let i = 0; i < 30; i++) uuids.add(await submit('test-remote-b', { text: `n${i}` }));
    const seen: string[] = [];
    await Promise.all(
      Array.from({ length: 6 }, async () => {
        for (;;) {
          const r = await w('POST', '/claim', { job_types: ['test-remote-b'], wait: 0 });
          const job = r.body.data.job;
          if (!job) return;
          seen.push(job.uuid);
          await upload(job.uuid, job.lease_token, Buffer.from('"done"'), 'application/json');
          expect((await w('POST', `/jobs/${job.uuid}/complete`, { lease_token: job.lease_token })).status).toBe(200);
        }
      }),
    );
    const mine = seen.filter((u) => uuids.has(u));
    expect(mine.length).toBe(30);
    expect(new Set(mine).size).toBe(30);
  }, 60_000);
});

it('sweeps staged blobs of attempts that ended without the worker', async () => {
  const uuid = await submit('test-remote', { source: media.url('/small.png') });
  const job = await claimJob(uuid);
  // Cancel, and nobody heartbeats: the sweep removes the copy.
  await svc.call('POST', `/api/v1/jobs/${uuid}/cancel`);
  expect((await fetch(job.input.source[0])).status).toBe(200);
  expect(await svc.app.remote.sweep()).toBeGreaterThan(0);
  expect((await fetch(job.input.source[0])).status).toBe(410);
});
