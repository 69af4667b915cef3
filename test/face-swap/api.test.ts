/**
 * The face swap through the public API: real HTTP, a local media server serving face-api's sample
 * photographs, the service's own worker threads. Identity is measured with the same face-api model.
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectFaces, descriptorDistance, loadFaceModels } from '../../src/processors/face-swap/detect.js';
import { decodeImage } from '../../src/processors/face-swap/image.js';
import { startServer, type TestServer } from '../helpers/servers.js';
import { startService, waitFor, waitTerminal, type TestService } from '../helpers/service.js';
import { landscape, portrait, sample } from './fixtures.js';

const LONG = 240_000;
let svc: TestService;
let media: TestServer;
const files = new Map<string, Buffer>();

beforeAll(async () => {
  files.set('/source.jpg', await portrait('curlyBlonde'));
  files.set('/target.jpg', sample(6));
  files.set('/landscape.jpg', await landscape());
  media = await startServer((req, res) => {
    const body = files.get(req.url ?? '');
    if (!body) return res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'image/jpeg' }).end(body);
  });
  svc = await startService({ WORKER_CONCURRENCY: '1' });
  await loadFaceModels();
}, LONG);
afterAll(async () => {
  await svc?.stop();
  await media?.close();
});

const swap = (input: Record<string, unknown>) =>
  svc.call('POST', '/api/v1/jobs/submit/image-face-swap', {
    body: { job_type: 'image-face-swap', model: 'warp-blend-v1', input },
  });

describe('image-face-swap through the API', { timeout: LONG }, () => {
  it('swaps the face: target dimensions kept, identity closer to the source', async () => {
    const sub = await swap({
      source: `${media.origin}/source.jpg`,
      target: `${media.origin}/target.jpg`,
      format: 'png',
    });
    expect(sub.status).toBe(200);
    const uuid = sub.body.data.uuid;
    // status_detail names the stage while it runs.
    const stages = new Set<string>();
    await waitFor(
      async () => {
        const s = (await svc.call('GET', `/api/v1/jobs/${uuid}/status`)).body.data;
        stages.add(s.status_detail);
        return ['completed', 'failed', 'cancelled'].includes(s.status);
      },
      'the swap to finish',
      LONG,
    );
    const done = await waitTerminal(svc.call, uuid);
    expect(done).toMatchObject({ status: 'completed', result_ready: true });
    expect(
      [...stages].some((d) => ['downloading media', 'detecting faces', 'swapping faces', 'encoding'].includes(d)),
    ).toBe(true);

    const link = (await svc.call('GET', `/api/v1/jobs/${uuid}/result`)).body.data;
    expect(link.content_type).toBe('image/png');
    const bytes = Buffer.from(await (await fetch(link.url)).arrayBuffer());
    const meta = await sharp(bytes).metadata();
    const targetMeta = await sharp(files.get('/target.jpg')).metadata();
    expect([meta.width, meta.height]).toEqual([targetMeta.width, targetMeta.height]);

    const decode = (b: Buffer) => decodeImage(b, 'test', 1e9);
    const src = (await detectFaces(await decode(files.get('/source.jpg')!), { descriptors: true }))[0]!;
    const original = (await detectFaces(await decode(files.get('/target.jpg')!), { descriptors: true }))[0]!;
    const after = await detectFaces(await decode(bytes), { descriptors: true });
    const centre = (f: typeof original) => [f.box.x + f.box.width / 2, f.box.y + f.box.height / 2];
    const [ox, oy] = centre(original);
    const swapped = after.reduce((a, f) =>
      Math.hypot(centre(f)[0]! - ox!, centre(f)[1]! - oy!) < Math.hypot(centre(a)[0]! - ox!, centre(a)[1]! - oy!)
        ? f
        : a,
    );
    expect(descriptorDistance(swapped.descriptor!, src.descriptor!)).toBeLessThan(
      descriptorDistance(swapped.descriptor!, original.descriptor!),
    );
  });

  it('fails cleanly with invalid_media when the target has no face', async () => {
    const sub = await swap({ source: `${media.origin}/source.jpg`, target: `${media.origin}/landscape.jpg` });
    const done = await waitTerminal(svc.call, sub.body.data.uuid);
    expect(done).toMatchObject({ status: 'failed', error_type: 'invalid_media', result_ready: false });
    expect(done.error_message).toMatch(/^input\.target: no face found/);
  });

  it('rejects contradictory options at submit with 400, naming the field', async () => {
    const r = await swap({
      source: `${media.origin}/source.jpg`,
      target: `${media.origin}/target.jpg`,
      faces: 'reference',
    });
    expect(r.status).toBe(400);
    expect(r.body.message).toBe('input.reference: required when faces is "reference"');
    const missing = await swap({ source: `${media.origin}/source.jpg` });
    expect(missing.status).toBe(400);
    expect(missing.body.message).toBe('input.target: is required');
  });
});
