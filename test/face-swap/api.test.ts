/**
 * The face swap through the public API: real HTTP, a local media server serving face-api's sample
 * photographs, the service's own worker threads. Identity is measured with the same face-api model.
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectFaces, descriptorDistance, loadFaceModels } from '../../src/processors/face-swap/detect.js';
import { faceDetectResultSchema } from '../../src/processors/face-swap/detect-job.js';
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
  files.set('/sample2.jpg', sample(2));
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
      // Each stage's detail carries the percent the job has reached: "detecting faces (10%)".
      [...stages].some((d) =>
        ['downloading media', 'detecting faces', 'swapping faces', 'encoding'].includes(d.replace(/ \(\d+%\)$/, '')),
      ),
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

  it("finds sample2's profile face, and refuses to swap it, naming it, rather than smear it", async () => {
    const det = await svc.call('POST', '/api/v1/jobs/submit/face-detect', {
      body: { job_type: 'face-detect', model: 'ssd-landmarks68-v1', input: { target: `${media.origin}/sample2.jpg` } },
    });
    expect((await waitTerminal(svc.call, det.body.data.uuid)).status).toBe('completed');
    const link = (await svc.call('GET', `/api/v1/jobs/${det.body.data.uuid}/result`)).body.data;
    const found = (await (await fetch(link.url)).json()) as {
      faces: { box: { x: number; y: number; width: number }; swappable: boolean; reason?: string }[];
    };
    // Refusals name a face by the corner of the box face-detect reports for it (not its landmarks').
    const at = `at x ${Math.round(found.faces[0]!.box.x)}, y ${Math.round(found.faces[0]!.box.y)}`;
    // Three faces, the leftmost the profile (x about 360, ~150 px wide), flagged as the swap refuses
    // it; the two frontal ones swappable, without a reason.
    expect(found.faces).toHaveLength(3);
    expect(found.faces[0]!.box.x).toBeGreaterThan(300);
    expect(found.faces[0]!.box.x).toBeLessThan(420);
    expect(found.faces[0]!.box.width).toBeGreaterThan(100);
    expect(found.faces.map(({ swappable, reason }) => ({ swappable, reason }))).toEqual([
      { swappable: false, reason: 'profile' },
      { swappable: true, reason: undefined },
      { swappable: true, reason: undefined },
    ]);
    expect(Object.keys(found.faces[1]!)).not.toContain('reason');

    const sub = await swap({
      source: `${media.origin}/source.jpg`,
      target: `${media.origin}/sample2.jpg`,
      target_face_indices: [0],
    });
    const done = await waitTerminal(svc.call, sub.body.data.uuid);
    expect(done).toMatchObject({ status: 'failed', error_type: 'invalid_media', result_ready: false });
    expect(done.error_message).toMatch(/^input\.target: face 0 \(at x 3\d\d, y \d+\) is in profile; /);
    expect(done.error_message).toContain(`face 0 (${at})`);
    // The other two faces swap, one by one as face-detect says they would, and with faces "all".
    for (const index of [1, 2]) {
      const one = await swap({
        source: `${media.origin}/source.jpg`,
        target: `${media.origin}/sample2.jpg`,
        target_face_indices: [index],
      });
      expect(await waitTerminal(svc.call, one.body.data.uuid)).toMatchObject({ status: 'completed' });
    }
    const ok = await swap({
      source: `${media.origin}/source.jpg`,
      target: `${media.origin}/sample2.jpg`,
      faces: 'all',
    });
    expect(await waitTerminal(svc.call, ok.body.data.uuid)).toMatchObject({ status: 'completed' });
    // As a source, too, the profile is refused by the index face-detect gave it.
    const asSource = await swap({
      source: `${media.origin}/sample2.jpg`,
      source_face_index: 0,
      target: `${media.origin}/target.jpg`,
    });
    const refused = await waitTerminal(svc.call, asSource.body.data.uuid);
    expect(refused).toMatchObject({ status: 'failed', error_type: 'invalid_media' });
    expect(refused.error_message).toMatch(/^input\.source: face 0 \(at x 3\d\d, y \d+\) is in profile; /);
    expect(refused.error_message).toContain(`face 0 (${at})`);
  });

  it('flags faces too small to swap, and refuses them by name rather than by a misread pose', async () => {
    // sample6 at 240 px wide: four faces 19-24 px, whose refined landmarks can collapse (one read
    // as a profile before faces this small were refused as such).
    files.set('/tiny.jpg', await sharp(sample(6)).resize(240).jpeg().toBuffer());
    const det = await svc.call('POST', '/api/v1/jobs/submit/face-detect', {
      body: { job_type: 'face-detect', model: 'ssd-landmarks68-v1', input: { target: `${media.origin}/tiny.jpg` } },
    });
    expect((await waitTerminal(svc.call, det.body.data.uuid)).status).toBe('completed');
    const link = (await svc.call('GET', `/api/v1/jobs/${det.body.data.uuid}/result`)).body.data;
    const found = (await (await fetch(link.url)).json()) as { faces: { swappable: boolean; reason?: string }[] };
    expect(found.faces.length).toBeGreaterThanOrEqual(3);
    expect(found.faces.map(({ swappable, reason }) => ({ swappable, reason }))).toEqual(
      found.faces.map(() => ({ swappable: false, reason: 'small' })),
    );
    const sub = await swap({ source: `${media.origin}/source.jpg`, target: `${media.origin}/tiny.jpg` });
    const done = await waitTerminal(svc.call, sub.body.data.uuid);
    expect(done).toMatchObject({ status: 'failed', error_type: 'invalid_media', result_ready: false });
    expect(done.error_message).toMatch(
      /^input\.target: the face at x \d+, y \d+ is too small to swap \(the swap needs a face at least 32 px across\)$/,
    );
  });

  it('names every face index that does not exist, of both inputs, in one answer', async () => {
    const sub = await swap({
      source: `${media.origin}/source.jpg`,
      target: `${media.origin}/target.jpg`,
      target_face_indices: [0, 7, 3, 5],
      source_face_index: 9,
    });
    const done = await waitTerminal(svc.call, sub.body.data.uuid);
    expect(done).toMatchObject({ status: 'failed', error_type: 'invalid_media', result_ready: false });
    expect(done.error_message).toBe(
      'input.source: no face at index 9 (1 face found, indices 0-0); input.target: no face at indices 7, 5 (4 faces found, indices 0-3)',
    );
  });

  it('rejects contradictory options at submit with 400, naming the field', async () => {
    const r = await swap({
      source: `${media.origin}/source.jpg`,
      target: `${media.origin}/target.jpg`,
      faces: 'reference',
    });
    expect(r.status).toBe(400);
    expect(r.body.message).toBe('input.reference: required when faces is "reference"');
    // Faces picked by index cannot also be picked by mode or by reference; indices are distinct.
    const base = { source: `${media.origin}/source.jpg`, target: `${media.origin}/target.jpg` };
    const all = await swap({ ...base, target_face_indices: [0], faces: 'all' });
    expect(all.status).toBe(400);
    expect(all.body.message).toBe(
      'input.target_face_indices: cannot be combined with faces "all" (the indices pick the faces)',
    );
    const withRef = await swap({ ...base, target_face_indices: [0], reference: `${media.origin}/source.jpg` });
    expect(withRef.status).toBe(400);
    expect(withRef.body.message).toBe('input.target_face_indices: cannot be combined with a reference image');
    const dup = await swap({ ...base, target_face_indices: [1, 1] });
    expect(dup.status).toBe(400);
    expect(dup.body.message).toMatch(/target_face_indices/);
    const negative = await swap({ ...base, source_face_index: -1 });
    expect(negative.status).toBe(400);
    expect(negative.body.message).toMatch(/source_face_index/);
    const missing = await swap({ source: `${media.origin}/source.jpg` });
    expect(missing.status).toBe(400);
    expect(missing.body.message).toBe('input.target: is required');
  });

  it('face-detect answers the faces as JSON, left to right', async () => {
    const sub = await svc.call('POST', '/api/v1/jobs/submit/face-detect', {
      body: { job_type: 'face-detect', model: 'ssd-landmarks68-v1', input: { target: `${media.origin}/target.jpg` } },
    });
    expect(sub.status).toBe(200);
    const done = await waitTerminal(svc.call, sub.body.data.uuid);
    expect(done).toMatchObject({ status: 'completed', result_ready: true });
    const link = (await svc.call('GET', `/api/v1/jobs/${sub.body.data.uuid}/result`)).body.data;
    expect(link.content_type).toBe('application/json');
    // The answer is what the OpenAPI document says it is (a strict schema: no field left out of it).
    const body = faceDetectResultSchema.parse(await (await fetch(link.url)).json());
    expect(body.preview).toMatch(/^data:image\/jpeg;base64,/);
    const doc = (await svc.call('GET', '/api/v1/openapi.json')).body;
    expect(Object.keys(doc.components.schemas.FaceDetectResult.properties.faces.items.properties)).toEqual(
      Object.keys(faceDetectResultSchema.shape.faces.element.shape),
    );
    expect(doc.paths['/results/{key}'].get.responses['200'].content['application/json'].schema.anyOf[0].$ref).toBe(
      '#/components/schemas/FaceDetectResult',
    );
    const meta = await sharp(files.get('/target.jpg')).metadata();
    expect([body.width, body.height]).toEqual([meta.width, meta.height]);
    expect(body.faces.length).toBeGreaterThanOrEqual(3);
    expect(body.faces.map((f) => f.index)).toEqual(body.faces.map((_, i) => i));
    // No profile among them: every face says the swap would take it.
    expect(body.faces.map((f) => f.swappable)).toEqual(body.faces.map(() => true));
    const centres = body.faces.map((f) => f.box.x + f.box.width / 2);
    expect(centres).toEqual([...centres].sort((a, b) => a - b));
    // The catalogue lists it with its model.
    const types = (await svc.call('GET', '/api/v1/job-types')).body.data.job_types as {
      name: string;
      models: { name: string }[];
    }[];
    expect(types.find((t) => t.name === 'face-detect')?.models.map((m) => m.name)).toEqual(['ssd-landmarks68-v1']);
  });
});
