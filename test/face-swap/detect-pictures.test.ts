/**
 * face-detect's pictures through the public API: the result carries a preview of the image and a
 * thumbnail of each face (JPEG data: URIs), so a client can show who is who without loading the
 * submitted URL. Each thumbnail must show its face: it is compared with the box cut from the
 * original here.
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from '../helpers/servers.js';
import { startService, waitTerminal, type TestService } from '../helpers/service.js';
import { sample } from './fixtures.js';

const LONG = 240_000;
let svc: TestService;
let media: TestServer;
const target = sample(6);

beforeAll(async () => {
  media = await startServer((req, res) => {
    if (req.url !== '/target.jpg') return res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'image/jpeg' }).end(target);
  });
  svc = await startService({ WORKER_CONCURRENCY: '1' });
}, LONG);
afterAll(async () => {
  await svc?.stop();
  await media?.close();
});

interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}
const jpegOf = (uri: string) => {
  expect(uri).toMatch(/^data:image\/jpeg;base64,/);
  return Buffer.from(uri.slice(uri.indexOf(',') + 1), 'base64');
};
/** Mean absolute difference per channel of two images brought to one small size (0-255). */
async function difference(a: sharp.Sharp, b: sharp.Sharp): Promise<number> {
  const px = (s: sharp.Sharp) => s.resize(32, 32, { fit: 'fill' }).removeAlpha().raw().toBuffer();
  const [x, y] = await Promise.all([px(a), px(b)]);
  let sum = 0;
  for (let i = 0; i < x.length; i++) sum += Math.abs(x[i]! - y[i]!);
  return sum / x.length;
}

describe('face-detect pictures', { timeout: LONG }, () => {
  it('carries a preview and one thumbnail per face that shows that face', async () => {
    const sub = await svc.call('POST', '/api/v1/jobs/submit/face-detect', {
      body: { job_type: 'face-detect', model: 'ssd-landmarks68-v1', input: { target: `${media.origin}/target.jpg` } },
    });
    const done = await waitTerminal(svc.call, sub.body.data.uuid);
    expect(done.status).toBe('completed');
    const link = (await svc.call('GET', `/api/v1/jobs/${sub.body.data.uuid}/result`)).body.data;
    const body = (await (await fetch(link.url)).json()) as {
      width: number;
      height: number;
      preview: string;
      faces: Array<{ box: Box; thumbnail: string }>;
    };
    const preview = await sharp(jpegOf(body.preview)).metadata();
    expect(preview.format).toBe('jpeg');
    expect(Math.max(preview.width, preview.height)).toBe(Math.min(640, Math.max(body.width, body.height)));
    expect(preview.width / preview.height).toBeCloseTo(body.width / body.height, 1);

    expect(body.faces.length).toBeGreaterThanOrEqual(3);
    for (const [i, face] of body.faces.entries()) {
      const thumb = jpegOf(face.thumbnail);
      const meta = await sharp(thumb).metadata();
      expect(Math.max(meta.width, meta.height)).toBeLessThanOrEqual(96);
      // Its own face, cut from the original with the same margin, against another face's cut.
      const cut = (b: Box) => {
        const left = Math.max(0, Math.floor(b.x - b.width / 4));
        const top = Math.max(0, Math.floor(b.y - b.height / 4));
        return sharp(target).extract({
          left,
          top,
          width: Math.min(body.width - left, Math.ceil(b.width * 1.5)),
          height: Math.min(body.height - top, Math.ceil(b.height * 1.5)),
        });
      };
      const own = await difference(sharp(thumb), cut(face.box));
      const other = await difference(sharp(thumb), cut(body.faces[(i + 1) % body.faces.length]!.box));
      expect(own).toBeLessThan(12);
      expect(own).toBeLessThan(other);
    }
  });
});
