import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import sharp from 'sharp';
import { startMediaServer, type MediaServer } from '../helpers/media-server.js';
import { startS3, type S3Server } from '../helpers/s3.js';
import { startService, waitTerminal, type TestService } from '../helpers/service.js';

let s3: S3Server;
let media: MediaServer;
let svc: TestService;
const saved: Record<string, string | undefined> = {};

beforeAll(async () => {
  s3 = await startS3();
  media = await startMediaServer();
  // The AWS SDK reads credentials from the process environment, as in production.
  for (const k of ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY']) {
    saved[k] = process.env[k];
    process.env[k] = s3.env[k];
  }
  svc = await startService({ ...s3.env, RESULT_URL_TTL: '2s' });
});
afterAll(async () => {
  await svc?.stop();
  await media?.close();
  await s3?.close();
  for (const [k, v] of Object.entries(saved))
    if (v === undefined) Reflect.deleteProperty(process.env, k);
    else process.env[k] = v;
});

describe('S3-compatible result storage', () => {
  it('stores the result in the bucket and hands out a presigned URL that expires', async () => {
    const sub = await svc.call('POST', '/api/v1/jobs/submit/image-transform', {
      body: {
        job_type: 'image-transform',
        model: 'mitchell',
        input: { source: media.url('/photo.jpg'), width: 200, format: 'png' },
      },
    });
    const done = await waitTerminal(svc.call, sub.body.data.uuid);
    expect(done.status).toBe('completed');
    const r = (await svc.call('GET', `/api/v1/jobs/${done.uuid}/result`)).body.data;
    expect(r.url.startsWith(`${s3.endpoint}/results/jobs/${done.uuid}.1.png?`)).toBe(true);
    expect(r.url).toContain('X-Amz-Signature=');
    expect(r.url).toContain('X-Amz-Expires=2');

    const dl = await fetch(r.url);
    expect(dl.status).toBe(200);
    const bytes = Buffer.from(await dl.arrayBuffer());
    expect(bytes.length).toBe(r.size_bytes);
    expect(await sharp(bytes).metadata()).toMatchObject({ format: 'png', width: 200, height: 150 });

    // The service's own download route is not used with S3.
    expect((await fetch(`${svc.base}/results/${done.uuid}.1.png`)).status).toBe(404);

    await new Promise((resolve) => setTimeout(resolve, 3500));
    expect((await fetch(r.url)).status).toBe(403);
  });
});
