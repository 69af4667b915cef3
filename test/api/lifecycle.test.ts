import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import sharp from 'sharp';
import { defaultJobTypes } from '../../src/processors/catalogue.js';
import { sleepJobType } from '../helpers/job-types.js';
import { startMediaServer, type MediaServer } from '../helpers/media-server.js';
import { startService, waitFor, waitTerminal, type TestService } from '../helpers/service.js';

let svc: TestService;
let media: MediaServer;
const offset = { ms: 0 };

beforeAll(async () => {
  media = await startMediaServer();
  svc = await startService(
    {},
    {
      jobTypes: [...defaultJobTypes({ threads: 1 }), sleepJobType()],
      clock: { now: () => Date.now() + offset.ms },
    },
  );
});
afterAll(async () => {
  await svc?.stop();
  await media?.close();
});

const transform = (input: Record<string, unknown>, model = 'lanczos3') => ({
  job_type: 'image-transform',
  model,
  input,
});

describe('image-transform end to end', () => {
  it('submits, runs, and serves the result on a signed URL', async () => {
    const sub = await svc.call('POST', '/api/v1/jobs/submit/image-transform', {
      body: transform({ source: media.url('/photo.jpg'), width: 512, format: 'webp' }),
    });
    expect(sub.status).toBe(200);
    expect(sub.body).toMatchObject({ code: 0, message: 'ok' });
    const job = sub.body.data;
    expect(job).toMatchObject({
      job_type: 'image-transform',
      model: 'lanczos3',
      status: 'queued',
      result_ready: false,
      error_type: null,
    });
    expect(job.uuid).toMatch(/^[0-9a-f-]{36}$/);
    expect(sub.headers.get('x-request-id')).toBeTruthy();

    const done = await waitTerminal(svc.call, job.uuid);
    expect(done).toMatchObject({ status: 'completed', result_ready: true, error_type: null, error_message: null });
    expect(Date.parse(done.finished_at)).toBeGreaterThanOrEqual(Date.parse(done.started_at));

    const res = await svc.call('GET', `/api/v1/jobs/${job.uuid}/result`);
    expect(res.status).toBe(200);
    const r = res.body.data;
    expect(r).toMatchObject({ uuid: job.uuid, content_type: 'image/webp' });
    expect(Date.parse(r.expires_at)).toBeGreaterThan(Date.now());

    // The URL works without an API key.
    const dl = await fetch(r.url);
    expect(dl.status).toBe(200);
    expect(dl.headers.get('content-type')).toBe('image/webp');
    const bytes = Buffer.from(await dl.arrayBuffer());
    expect(bytes.length).toBe(r.size_bytes);
    const meta = await sharp(bytes).metadata();
    expect(meta).toMatchObject({ format: 'webp', width: 512, height: 384 });
  });

  it('applies EXIF orientation and the chosen kernel and format', async () => {
    const sub = await svc.call('POST', '/api/v1/jobs/submit/image-transform', {
      body: transform({ source: [media.url('/rotated.jpg')], height: 400, format: 'png' }, 'nearest'),
    });
    const done = await waitTerminal(svc.call, sub.body.data.uuid);
    expect(done.status).toBe('completed');
    const r = (await svc.call('GET', `/api/v1/jobs/${done.uuid}/result`)).body.data;
    const meta = await sharp(Buffer.from(await (await fetch(r.url)).arrayBuffer())).metadata();
    // Stored 800x600 with orientation 6: displayed portrait, so 300x400 after resizing.
    expect(meta).toMatchObject({ format: 'png', width: 300, height: 400 });
  });

  it('fails undecodable media with invalid_media', async () => {
    const sub = await svc.call('POST', '/api/v1/jobs/submit/image-transform', {
      body: transform({ source: media.url('/corrupt.jpg'), width: 10 }),
    });
    const done = await waitTerminal(svc.call, sub.body.data.uuid);
    expect(done).toMatchObject({ status: 'failed', error_type: 'invalid_media', result_ready: false });
    expect(done.error_message).toMatch(/^input\.source: /);
  });

  it('fails media that is not an image with invalid_media, whatever its Content-Type says', async () => {
    const sub = await svc.call('POST', '/api/v1/jobs/submit/image-transform', {
      body: transform({ source: media.url('/page.html') }),
    });
    const done = await waitTerminal(svc.call, sub.body.data.uuid);
    expect(done).toMatchObject({ status: 'failed', error_type: 'invalid_media' });
    expect(done.error_message).toContain('input.source: not an image');
  });

  it('fails unreachable media with media_fetch_failed naming the slot', async () => {
    const sub = await svc.call('POST', '/api/v1/jobs/submit/image-transform', {
      body: transform({ source: media.url('/missing.jpg') }),
    });
    const done = await waitTerminal(svc.call, sub.body.data.uuid);
    expect(done).toMatchObject({
      status: 'failed',
      error_type: 'media_fetch_failed',
      error_message: 'input.source: download failed: HTTP 404',
    });
    const res = await svc.call('GET', `/api/v1/jobs/${done.uuid}/result`);
    expect(res.status).toBe(409);
    expect(res.body).toEqual({ code: -1, message: 'job is failed; it has no result', data: {} });
  });

  it('answers 409 for a result that is not ready yet', async () => {
    const sub = await svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
      body: { job_type: 'test-sleep', model: 'v1', input: { ms: 60_000 } },
    });
    const uuid = sub.body.data.uuid;
    const res = await svc.call('GET', `/api/v1/jobs/${uuid}/result`);
    expect(res.status).toBe(409);
    expect(res.body.code).toBe(-1);
    expect(res.body.message).toMatch(/^result is not ready: job is (queued|processing)$/);
    await svc.call('POST', `/api/v1/jobs/${uuid}/cancel`);
  });

  it('shows the stage in status_detail while processing', async () => {
    const sub = await svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
      body: { job_type: 'test-sleep', model: 'v1', input: { ms: 60_000 } },
    });
    const uuid = sub.body.data.uuid;
    const seen = await waitFor(async () => {
      const s = (await svc.call('GET', `/api/v1/jobs/${uuid}/status`)).body.data;
      return s.status === 'processing' && s.status_detail === 'sleeping' ? s : undefined;
    }, 'the processing stage');
    expect(seen.started_at).not.toBeNull();
    await svc.call('POST', `/api/v1/jobs/${uuid}/cancel`);
  });

  it('maps processor errors to error types without leaking internals', async () => {
    const a = await svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
      body: { job_type: 'test-sleep', model: 'v1', input: { fail: 'processing_error' } },
    });
    const b = await svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
      body: { job_type: 'test-sleep', model: 'v1', input: { fail: 'crash' } },
    });
    expect(await waitTerminal(svc.call, a.body.data.uuid)).toMatchObject({
      status: 'failed',
      error_type: 'processing_error',
      error_message: 'the test processor failed on purpose',
    });
    const crashed = await waitTerminal(svc.call, b.body.data.uuid);
    expect(crashed).toMatchObject({ status: 'failed', error_type: 'internal_error' });
    expect(crashed.error_message).not.toContain('boom');
  });
});

describe('signed result URLs', () => {
  let url: URL;
  beforeAll(async () => {
    const sub = await svc.call('POST', '/api/v1/jobs/submit/image-transform', {
      body: transform({ source: media.url('/small.png'), format: 'jpeg' }),
    });
    await waitTerminal(svc.call, sub.body.data.uuid);
    url = new URL((await svc.call('GET', `/api/v1/jobs/${sub.body.data.uuid}/result`)).body.data.url);
  });

  it('rejects a tampered signature, expiry or path with 403', async () => {
    const variants: string[] = [];
    const sig = url.searchParams.get('signature')!;
    const exp = url.searchParams.get('expires')!;
    const withParams = (p: Record<string, string | null>, path = url.pathname) => {
      const u = new URL(path, url);
      for (const [k, v] of Object.entries({ expires: exp, signature: sig, ...p }))
        if (v !== null) u.searchParams.set(k, v);
      return u.toString();
    };
    variants.push(withParams({ signature: sig.slice(0, -1) + (sig.endsWith('A') ? 'B' : 'A') }));
    variants.push(withParams({ expires: String(Number(exp) + 3600) }));
    variants.push(withParams({ signature: null }));
    variants.push(withParams({ expires: null }));
    variants.push(withParams({ expires: '-1' }));
    variants.push(withParams({}, url.pathname.replace(/\.jpg$/, '.png')));
    for (const v of variants) {
      const res = await fetch(v);
      expect(res.status, v).toBe(403);
      expect(await res.json()).toMatchObject({ code: -1, data: {} });
    }
    expect((await fetch(url)).status).toBe(200);
  });

  it('rejects an expired URL with 403', async () => {
    offset.ms = 2 * 3600_000;
    try {
      const res = await fetch(url);
      expect(res.status).toBe(403);
      expect((await res.json()).message).toMatch(/expired/);
    } finally {
      offset.ms = 0;
    }
  });
});
