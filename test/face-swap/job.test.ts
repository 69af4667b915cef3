/**
 * The job type end to end, through its worker-thread pool, on face-api's sample photographs.
 * Identity is checked the way a person would not be fooled easily: with the same face-api
 * recognition model, the swapped face must be closer to the source face than to the face it replaced.
 * Generous timeouts, no timing assertions: this must pass on a loaded 2-core machine.
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobError } from '../../src/errors.js';
import { detectFaces, descriptorDistance, leftToRight, loadFaceModels } from '../../src/processors/face-swap/detect.js';
import { decodeImage } from '../../src/processors/face-swap/image.js';
import { createFaceSwapJobType, type FaceSwapJobType } from '../../src/processors/face-swap/index.js';
import type { FaceDetectJobType } from '../../src/processors/face-swap/detect-job.js';
import type { Box, DetectedFace, RgbImage } from '../../src/processors/face-swap/types.js';
import {
  BAR_COLOUR,
  PAINT,
  barRect,
  barredFace,
  strandOverFace,
  landscape,
  media,
  paintedFace,
  portrait,
  runContext,
  sample,
  faceJobTypes,
} from './fixtures.js';
import { interior, laplacianVariance, lipHues, paintRemnants } from './measure.js';

const LONG = 180_000;
const decode = (bytes: Buffer | Uint8Array) => decodeImage(bytes, 'test', 1e9);

/** The face's landmark bounding box, grown by `grow` x its size on every side, as integers. */
function around(face: DetectedFace, grow: number, img: RgbImage): Box {
  const xs = face.landmarks.map((p) => p.x);
  const ys = face.landmarks.map((p) => p.y);
  const x0 = Math.min(...xs);
  const y0 = Math.min(...ys);
  const w = Math.max(...xs) - x0;
  const h = Math.max(...ys) - y0;
  const left = Math.max(0, Math.floor(x0 - grow * w));
  const top = Math.max(0, Math.floor(y0 - grow * h));
  return {
    x: left,
    y: top,
    width: Math.min(img.width, Math.ceil(x0 + w + grow * w)) - left,
    height: Math.min(img.height, Math.ceil(y0 + h + grow * h)) - top,
  };
}

function inBox(b: Box, x: number, y: number): boolean {
  return x >= b.x && x < b.x + b.width && y >= b.y && y < b.y + b.height;
}

/** Mean absolute difference over a box. */
function meanDiff(a: RgbImage, b: RgbImage, box: Box): number {
  let sum = 0;
  for (let y = box.y; y < box.y + box.height; y++) {
    for (let x = box.x; x < box.x + box.width; x++) {
      const o = (y * a.width + x) * 3;
      for (let c = 0; c < 3; c++) sum += Math.abs(a.data[o + c]! - b.data[o + c]!);
    }
  }
  return sum / (box.width * box.height * 3);
}

/** Number of pixels that differ at all, outside every box in `keepOut`. */
function changedOutside(a: RgbImage, b: RgbImage, keepOut: Box[]): number {
  let changed = 0;
  for (let y = 0; y < a.height; y++) {
    for (let x = 0; x < a.width; x++) {
      if (keepOut.some((k) => inBox(k, x, y))) continue;
      const o = (y * a.width + x) * 3;
      if (a.data[o] !== b.data[o] || a.data[o + 1] !== b.data[o + 1] || a.data[o + 2] !== b.data[o + 2]) changed++;
    }
  }
  return changed;
}

/** The face in `faces` whose box centre is nearest `to`'s. */
function nearest(faces: DetectedFace[], to: DetectedFace): DetectedFace {
  const c = (f: DetectedFace) => [f.box.x + f.box.width / 2, f.box.y + f.box.height / 2] as const;
  const [tx, ty] = c(to);
  return faces.reduce((best, f) => {
    const [x, y] = c(f);
    const [bx, by] = c(best);
    return Math.hypot(x - tx, y - ty) < Math.hypot(bx - tx, by - ty) ? f : best;
  });
}

async function expectJobError(p: Promise<unknown>, message: RegExp): Promise<void> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(JobError);
  expect((err as JobError).errorType).toBe('invalid_media');
  expect((err as JobError).message).toMatch(message);
}

describe('image-face-swap (warp-blend-v1)', { timeout: LONG }, () => {
  let jt: FaceSwapJobType;
  let fd: FaceDetectJobType;

  let close: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    // Models in the worker thread (for the jobs) and here (to measure the results).
    [{ jt, fd, close }] = await Promise.all([faceJobTypes(), loadFaceModels()]);
  }, LONG);

  afterAll(async () => {
    await close?.();
  });

  it('swaps the largest face: target size kept, identity moved to the source, rest untouched', async () => {
    const source = await portrait('curlyBlonde');
    const target = sample(6);
    const run = runContext({ source, target }, { format: 'png' });
    const result = await jt.run(run.ctx);

    expect(result.contentType).toBe('image/png');
    expect(result.extension).toBe('png');
    expect(run.stages).toEqual(['detecting faces', 'swapping faces', 'encoding']);

    const before = await decode(target);
    const after = await decode(result.bytes);
    expect([after.width, after.height]).toEqual([before.width, before.height]);

    const srcFace = (await detectFaces(await decode(source), { descriptors: true }))[0]!;
    const beforeFaces = await detectFaces(before, { descriptors: true });
    const original = beforeFaces[0]!; // the largest face is the one replaced
    const swapped = nearest(await detectFaces(after, { descriptors: true }), original);
    const toSource = descriptorDistance(swapped.descriptor!, srcFace.descriptor!);
    const toOriginal = descriptorDistance(swapped.descriptor!, original.descriptor!);
    expect(toSource).toBeLessThan(toOriginal);
    // Same person by face-api's usual threshold (0.6), and by our stricter goal.
    expect(toSource).toBeLessThan(0.4);
    // As sharp as the photo around it: no soft patch at 100 %.
    const sharpness = laplacianVariance(after, original.landmarks) / laplacianVariance(before, original.landmarks);
    expect(sharpness).toBeGreaterThanOrEqual(0.7);

    // The face visibly changed; everything well outside it is bit-identical (PNG is lossless).
    expect(meanDiff(before, after, around(original, 0, before))).toBeGreaterThan(4);
    expect(changedOutside(before, after, [around(original, 0.5, before)])).toBe(0);
    // The other faces in the photo are untouched.
    for (const other of beforeFaces.slice(1)) expect(meanDiff(before, after, around(other, 0, before))).toBe(0);
    // Both lips got one colour correction: their hues lie no further apart than in the source
    // (round 2 tinted them apart, a lilac upper lip over an orange lower one, 17° against 8°).
    const lips = lipHues(after, swapped.landmarks);
    const srcLips = lipHues(await decode(source), srcFace.landmarks);
    expect(Math.abs(lips.lower - lips.upper)).toBeLessThan(Math.abs(srcLips.lower - srcLips.upper) + 5);
  });

  it('swaps a large face at the work size and brings it back as sharp as the photo', async () => {
    // sample6's brunette at 2.5x: a face of ~475 px, swapped at the source's ~256 and upsampled.
    const source = await portrait('curlyBlonde');
    const target = await portrait('brunette', 2.5);
    const result = await jt.run(runContext({ source, target }, { format: 'png' }).ctx);
    const before = await decode(target);
    const after = await decode(result.bytes);
    const original = (await detectFaces(before, { descriptors: true }))[0]!;
    const srcFace = (await detectFaces(await decode(source), { descriptors: true }))[0]!;
    const swapped = nearest(await detectFaces(after, { descriptors: true }), original);
    expect(descriptorDistance(swapped.descriptor!, srcFace.descriptor!)).toBeLessThan(0.4);
    const sharpness = laplacianVariance(after, original.landmarks) / laplacianVariance(before, original.landmarks);
    expect(sharpness).toBeGreaterThanOrEqual(0.7);
    expect(changedOutside(before, after, [around(original, 0.5, before)])).toBe(0);
  });

  it('answers JPEG by default, decodable, with the target size', async () => {
    const run = runContext({ source: await portrait('darkHair'), target: await portrait('brunette') });
    const result = await jt.run(run.ctx);
    expect(result.contentType).toBe('image/jpeg');
    expect(result.extension).toBe('jpg');
    const meta = await sharp(result.bytes).metadata();
    expect(meta.format).toBe('jpeg');
    expect([meta.width, meta.height]).toEqual([552, 552]);
  });

  it('with a reference, replaces only the face that matches it', async () => {
    const target = sample(4);
    // The third-largest face of sample4, cropped and scaled: a different image of that person.
    const reference = await portrait('sample4third', 0.8);
    const run = runContext({ source: await portrait('curlyBlonde'), target, reference }, { format: 'png' });
    const result = await jt.run(run.ctx);

    const before = await decode(target);
    const after = await decode(result.bytes);
    const faces = await detectFaces(before);
    expect(faces.length).toBe(4);
    const refFace = (await detectFaces(await decode(reference), { descriptors: true }))[0]!;
    // Which target face is the referenced person, measured independently here.
    const withDesc = await detectFaces(before, { descriptors: true });
    const distances = withDesc.map((f) => descriptorDistance(f.descriptor!, refFace.descriptor!));
    const match = distances.indexOf(Math.min(...distances));
    expect(match).toBe(2);

    expect(meanDiff(before, after, around(faces[match]!, 0, before))).toBeGreaterThan(4);
    const srcFace = (await detectFaces(await decode(await portrait('curlyBlonde')), { descriptors: true }))[0]!;
    const swapped = nearest(await detectFaces(after, { descriptors: true }), faces[match]!);
    expect(descriptorDistance(swapped.descriptor!, srcFace.descriptor!)).toBeLessThan(0.4);
    faces.forEach((f, i) => {
      if (i !== match) expect(meanDiff(before, after, around(f, 0, before)), `face ${i}`).toBe(0);
    });
    expect(changedOutside(before, after, [around(faces[match]!, 0.5, before)])).toBe(0);
  });

  it('fails cleanly when no target face matches the reference', async () => {
    const run = runContext({
      source: await portrait('curlyBlonde'),
      target: sample(4),
      reference: await portrait('sample6second'),
    });
    await expectJobError(jt.run(run.ctx), /^input\.reference: no face in input\.target matches the reference face/);
  });

  it('with faces=all, replaces every face', async () => {
    const target = sample(4);
    const run = runContext({ source: await portrait('curlyBlonde'), target }, { faces: 'all', format: 'png' });
    const result = await jt.run(run.ctx);
    const before = await decode(target);
    const after = await decode(result.bytes);
    const faces = await detectFaces(before);
    for (const [i, f] of faces.entries())
      expect(meanDiff(before, after, around(f, 0, before)), `face ${i}`).toBeGreaterThan(4);
    expect(
      changedOutside(
        before,
        after,
        faces.map((f) => around(f, 0.5, before)),
      ),
    ).toBe(0);
  });

  it("leaves no remnant of the target's painted lips and eyelids in the new face", async () => {
    const base = await portrait('brunette');
    const lm = (await detectFaces(await decode(base)))[0]!.landmarks;
    const target = await paintedFace(base, lm);
    const painted = await decode(target);
    // The paint is plainly there before the swap...
    expect(paintRemnants(painted, lm, PAINT)).toBeGreaterThan(1500);
    const source = await portrait('curlyBlonde');
    const after = await decode((await jt.run(runContext({ source, target }, { format: 'png' }).ctx)).bytes);
    // The same swap onto the unpainted target: the source's own make-up (a teal eyeliner) is the baseline.
    const clean = await decode((await jt.run(runContext({ source, target: base }, { format: 'png' }).ctx)).bytes);
    // ...and none of it after: no more pixels have moved a fifth of the way towards the paint than
    // without it (round 1 left 250 such pixels at the lips and 2500 at the lids).
    const baseline = paintRemnants(clean, lm, PAINT);
    expect(baseline).toBeLessThan(100);
    expect(paintRemnants(after, lm, PAINT)).toBeLessThanOrEqual(baseline + 5);
    // The colour still follows the target's skin: mean face colour close to the unpainted target's.
    const r = interior(lm, 0.25, 0.5, 0.3);
    const box = { x: r.x0, y: r.y0, width: r.x1 - r.x0, height: r.y1 - r.y0 };
    expect(meanDiff(await decode(base), after, box)).toBeLessThan(25);
  });

  // At 2.5x the face is swapped at the work size and brought back: the bar must stay exact there too.
  it.each([1, 2.5])(
    'keeps an opaque bar across the lower face in front of the new face (face at %sx)',
    async (scale) => {
      const base = await portrait('brunette', scale);
      const lm = (await detectFaces(await decode(base)))[0]!.landmarks;
      const target = await barredFace(base, lm);
      const run = runContext({ source: await portrait('curlyBlonde'), target }, { format: 'png' });
      const before = await decode(target);
      const after = await decode((await jt.run(run.ctx)).bytes);
      const bar = barRect(lm);
      // The bar itself, away from its anti-aliased edge: bit-identical (and still the bar's colour).
      const inner = {
        x: Math.max(0, bar.left + 2),
        y: bar.top + 2,
        width: Math.min(before.width, bar.left + bar.width - 2) - Math.max(0, bar.left + 2),
        height: bar.height - 4,
      };
      expect(changedOutside(before, after, [])).toBeGreaterThan(0);
      let changed = 0;
      for (let y = inner.y; y < inner.y + inner.height; y++) {
        for (let x = inner.x; x < inner.x + inner.width; x++) {
          const o = (y * after.width + x) * 3;
          for (let c = 0; c < 3; c++) if (after.data[o + c] !== before.data[o + c]) changed++;
        }
      }
      expect(changed).toBe(0);
      expect(
        Array.from(
          after.data.subarray((inner.y * after.width + inner.x + 5) * 3, (inner.y * after.width + inner.x + 5) * 3 + 3),
        ),
      ).toEqual([...BAR_COLOUR]);
      // The face above the bar did change.
      const eyes = interior(lm, 0.15, 0.2, 0.55);
      expect(
        meanDiff(before, after, { x: eyes.x0, y: eyes.y0, width: eyes.x1 - eyes.x0, height: eyes.y1 - eyes.y0 }),
      ).toBeGreaterThan(4);
    },
  );

  it("does not carry what covers the source's face (a strand across its brow) into the target", async () => {
    const base = await portrait('curlyBlonde');
    const srcLm = (await detectFaces(await decode(base)))[0]!.landmarks;
    const target = await portrait('brunette');
    const lm = (await detectFaces(await decode(target)))[0]!.landmarks;
    const swap = async (source: Buffer) =>
      decode((await jt.run(runContext({ source, target }, { format: 'png' }).ctx)).bytes);
    // Pixels of the new face moved towards the strand's colour, against the same swap without it.
    const baseline = paintRemnants(await swap(base), lm, BAR_COLOUR);
    const after = paintRemnants(await swap(await strandOverFace(base, srcLm)), lm, BAR_COLOUR);
    expect(after).toBeLessThanOrEqual(baseline + 30);
  });

  it('face-detect lists the faces left to right, with boxes, scores and landmarks, as JSON', async () => {
    const target = sample(4);
    const abort = new AbortController();
    const stages: string[] = [];
    const result = await fd.run({
      model: 'ssd-landmarks68-v1',
      options: fd.options.parse({}),
      media: { target: media(target) },
      signal: abort.signal,
      progress: (s) => stages.push(s),
    });
    expect(result.contentType).toBe('application/json');
    expect(result.extension).toBe('json');
    expect(stages).toEqual(['detecting faces']);
    const body = JSON.parse(result.bytes.toString('utf8')) as {
      width: number;
      height: number;
      faces: { index: number; box: Box; score: number; landmarks: [number, number][] }[];
    };
    const img = await decode(target);
    expect([body.width, body.height]).toEqual([img.width, img.height]);
    expect(body.faces.map((f) => f.index)).toEqual([0, 1, 2, 3]);
    const centres = body.faces.map((f) => f.box.x + f.box.width / 2);
    expect(centres).toEqual([...centres].sort((a, b) => a - b));
    // The same faces the swap sees, in the same order.
    const mine = leftToRight(await detectFaces(img));
    body.faces.forEach((f, i) => {
      expect(f.landmarks).toHaveLength(68);
      expect(f.score).toBeGreaterThan(0.5);
      expect(Math.abs(f.box.x - mine[i]!.box.x)).toBeLessThan(1);
      expect(Math.abs(f.box.width - mine[i]!.box.width)).toBeLessThan(1);
      // The landmarks lie in the box.
      for (const [x, y] of f.landmarks) {
        expect(x).toBeGreaterThan(f.box.x - 0.2 * f.box.width);
        expect(x).toBeLessThan(f.box.x + 1.2 * f.box.width);
        expect(y).toBeGreaterThan(f.box.y - 0.2 * f.box.height);
        expect(y).toBeLessThan(f.box.y + 1.2 * f.box.height);
      }
    });
  });

  it('with target_face_indices [1, 3], replaces exactly faces 1 and 3 (face-detect order)', async () => {
    const target = sample(4);
    const run = runContext(
      { source: await portrait('curlyBlonde'), target },
      { target_face_indices: [1, 3], format: 'png' },
    );
    const result = await jt.run(run.ctx);
    const before = await decode(target);
    const after = await decode(result.bytes);
    const faces = leftToRight(await detectFaces(before));
    expect(faces).toHaveLength(4);
    for (const i of [1, 3])
      expect(meanDiff(before, after, around(faces[i]!, 0, before)), `face ${i}`).toBeGreaterThan(4);
    for (const i of [0, 2]) expect(meanDiff(before, after, around(faces[i]!, 0, before)), `face ${i}`).toBe(0);
    expect(changedOutside(before, after, [around(faces[1]!, 0.5, before), around(faces[3]!, 0.5, before)])).toBe(0);
  });

  it('fails clearly for a face index that does not exist', async () => {
    const source = await portrait('curlyBlonde');
    await expectJobError(
      jt.run(runContext({ source, target: sample(4) }, { target_face_indices: [0, 4] }).ctx),
      /^input\.target: no face at index 4 \(4 faces found, indices 0-3\)$/,
    );
    await expectJobError(
      jt.run(runContext({ source, target: sample(4) }, { source_face_index: 1 }).ctx),
      /^input\.source: no face at index 1 \(1 face found, indices 0-0\)$/,
    );
    await expectJobError(
      jt.run(runContext({ source, target: sample(4), reference: source }, { target_face_indices: [0] }).ctx),
      /^input\.target_face_indices: cannot be combined with a reference image$/,
    );
  });

  it('fails cleanly, naming the input, when a picture has no face', async () => {
    const noFace = await landscape();
    const face = await portrait('brunette');
    await expectJobError(jt.run(runContext({ source: noFace, target: face }).ctx), /^input\.source: no face found$/);
    await expectJobError(jt.run(runContext({ source: face, target: noFace }).ctx), /^input\.target: no face found$/);
    await expectJobError(
      jt.run(runContext({ source: face, target: sample(4), reference: noFace }).ctx),
      /^input\.reference: no face found$/,
    );
  });

  it('refuses undecodable input and contradictory options', async () => {
    const face = await portrait('brunette');
    await expectJobError(
      jt.run(runContext({ source: Buffer.from('definitely not an image'), target: face }).ctx),
      /^input\.source: not a decodable image$/,
    );
    await expectJobError(
      jt.run(runContext({ source: face, target: face }, { faces: 'reference' }).ctx),
      /^input\.reference: required/,
    );
  });

  it('respects EXIF orientation', async () => {
    // An upright portrait stored rotated a quarter turn, with orientation 6 ("rotate 90° CW to view").
    const upright = await sharp(sample(6)).extract({ left: 1317, top: 90, width: 552, height: 700 }).png().toBuffer();
    const stored = await sharp(upright).rotate(-90).withMetadata({ orientation: 6 }).jpeg({ quality: 95 }).toBuffer();
    const storedMeta = await sharp(stored).metadata();
    expect([storedMeta.width, storedMeta.height, storedMeta.orientation]).toEqual([700, 552, 6]);

    const run = runContext({ source: await portrait('curlyBlonde'), target: stored }, { format: 'png' });
    const result = await jt.run(run.ctx);
    const after = await decode(result.bytes);
    expect([after.width, after.height]).toEqual([552, 700]);
    // Upright and unchanged away from the face (up to JPEG noise).
    const before = await decode(upright);
    const face = (await detectFaces(before))[0]!;
    const corner = { x: 0, y: 600, width: 552, height: 100 };
    expect(inBox(around(face, 0.5, before), 0, 600)).toBe(false);
    expect(meanDiff(before, after, corner)).toBeLessThan(3);
    expect(meanDiff(before, after, around(face, 0, before))).toBeGreaterThan(4);
  });

  it('refuses images over the pixel limit before decoding them', async () => {
    const small = createFaceSwapJobType({ maxPixels: 1_000_000 });
    try {
      const run = runContext({ source: await portrait('darkHair'), target: sample(6) });
      await expectJobError(small.run(run.ctx), /^input\.target: image is 1920x1537 \(3 MP\), over the 1 MP limit$/);
    } finally {
      await small.close();
    }
  });

  it('stops when the job is aborted, and the pool keeps working', async () => {
    const source = await portrait('curlyBlonde');
    const target = sample(6);

    // Already aborted: refused at once.
    const pre = runContext({ source, target });
    pre.abort.abort(new Error('cancelled before start'));
    await expect(jt.run(pre.ctx)).rejects.toThrow('cancelled before start');

    // Aborted while running: as soon as the worker reports its first stage (two detector passes,
    // each followed by a cancellation check, are still ahead of it).
    const running = runContext({ source, target });
    running.ctx.progress = (stage) => {
      running.stages.push(stage);
      running.abort.abort(new Error('cancelled while running'));
    };
    await expect(jt.run(running.ctx)).rejects.toThrow('cancelled while running');
    expect(running.stages).toEqual(['detecting faces']);

    // Aborted while queued behind another job (one thread): dropped, the first job completes.
    const first = runContext({ source, target });
    const queued = runContext({ source, target });
    const p1 = jt.run(first.ctx);
    const p2 = jt.run(queued.ctx);
    queued.abort.abort(new Error('cancelled in queue'));
    await expect(p2).rejects.toThrow('cancelled in queue');
    const r1 = await p1;
    expect(r1.contentType).toBe('image/jpeg');
    expect(queued.stages).toEqual([]);
  });
});
