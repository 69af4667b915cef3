/**
 * Round 3 of the face swap, end to end through the job type: the target's open mouth (teeth) stays
 * when the source's is closed, the result's landmarks are the target's (pose and expression kept),
 * and targets rolled by ±25° swap as well as upright ones. Generous timeouts, no timing assertions.
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobError } from '../../src/errors.js';
import { rgbToLab } from '../../src/processors/face-swap/color.js';
import {
  computeDescriptor,
  descriptorDistance,
  detectFaces,
  findFaces,
  largestFace,
  leftToRight,
  loadFaceModels,
  refineLandmarks,
} from '../../src/processors/face-swap/detect.js';
import { convexHull, faceSize } from '../../src/processors/face-swap/geometry.js';
import { decodeImage } from '../../src/processors/face-swap/image.js';
import { createFaceSwapJobType, type FaceSwapJobType } from '../../src/processors/face-swap/index.js';
import { rasterizePolygon } from '../../src/processors/face-swap/mask.js';
import { levelled } from '../../src/processors/face-swap/level.js';
import { mouthGap, OPEN_GAP } from '../../src/processors/face-swap/mouth.js';
import { openingMask } from '../../src/processors/face-swap/opening.js';
import { DEFAULT_TUNING, extendForehead } from '../../src/processors/face-swap/swap.js';
import type { DetectedFace, Point, RgbImage } from '../../src/processors/face-swap/types.js';
import { portrait, runContext, sample } from './fixtures.js';

const LONG = 240_000;
const decode = (bytes: Buffer | Uint8Array) => decodeImage(bytes, 'test', 1e9);

function centre(lm: readonly Point[], from: number, to: number): Point {
  const n = to - from;
  const s = lm.slice(from, to).reduce((a, p) => ({ x: a.x + p.x, y: a.y + p.y }), { x: 0, y: 0 });
  return { x: s.x / n, y: s.y / n };
}

/** Mean landmark distance over `from..to`, as a fraction of `a`'s inter-ocular distance. */
function landmarkError(a: readonly Point[], b: readonly Point[], from = 0, to = 68): number {
  const l = centre(a, 36, 42);
  const r = centre(a, 42, 48);
  let s = 0;
  for (let i = from; i < to; i++) s += Math.hypot(a[i]!.x - b[i]!.x, a[i]!.y - b[i]!.y);
  return s / (to - from) / Math.hypot(l.x - r.x, l.y - r.y);
}

/** Mean absolute RGB difference of `a` and `b` inside `polygon`. */
function meanDiffInside(a: RgbImage, b: RgbImage, polygon: readonly Point[]): number {
  const inside = rasterizePolygon(
    polygon.map((p) => ({ x: p.x, y: p.y })),
    { left: 0, top: 0, width: a.width, height: a.height },
  );
  let sum = 0;
  let n = 0;
  for (let i = 0; i < inside.length; i++) {
    if (!inside[i]) continue;
    for (let c = 0; c < 3; c++) sum += Math.abs(a.data[i * 3 + c]! - b.data[i * 3 + c]!);
    n++;
  }
  expect(n).toBeGreaterThan(50);
  return sum / (3 * n);
}

/** Mean absolute RGB difference inside the inner lip contour (60-67) of `lm`. */
const innerMouthDiff = (a: RgbImage, b: RgbImage, lm: readonly Point[]) => meanDiffInside(a, b, lm.slice(60, 68));

/** Mean absolute RGB difference over the inner face (brows, eyes, nose: landmarks 17-47's hull). */
const innerDiff = (a: RgbImage, b: RgbImage, lm: readonly Point[]) =>
  meanDiffInside(a, b, convexHull(lm.slice(17, 48)));

/** The face of `img` whose landmarks' crop `near` places (refineLandmarks), with its descriptor. */
async function readFace(
  img: RgbImage,
  near: readonly Point[],
): Promise<{ landmarks: Point[]; descriptor: Float32Array }> {
  const landmarks = await refineLandmarks(img, near);
  return { landmarks, descriptor: await computeDescriptor(img, landmarks) };
}

/** The largest face of a picture, with its descriptor. */
async function face(img: RgbImage): Promise<DetectedFace> {
  const faces = await detectFaces(img, { descriptors: true });
  expect(faces.length).toBeGreaterThan(0);
  return faces[0]!;
}

function encodePng(img: RgbImage): Promise<Buffer> {
  return sharp(img.data, { raw: { width: img.width, height: img.height, channels: 3 } })
    .png()
    .toBuffer();
}

/** `bytes` rolled by `deg` degrees (grey corners), as JPEG. */
function rolled(bytes: Buffer, deg: number): Promise<Buffer> {
  return sharp(bytes).rotate(deg, { background: '#808080' }).jpeg({ quality: 95 }).toBuffer();
}

describe('image-face-swap keeps the target’s expression and pose', { timeout: LONG }, () => {
  let jt: FaceSwapJobType;
  let source: Buffer;
  let srcFace: DetectedFace;

  beforeAll(async () => {
    jt = createFaceSwapJobType();
    await Promise.all([jt.warmup(), loadFaceModels()]);
    // sample3's curly blonde: closed lips.
    source = await portrait('curlyBlonde');
    srcFace = await face(await decode(source));
    expect(mouthGap(srcFace.landmarks, faceSize(srcFace.landmarks))).toBeLessThan(OPEN_GAP);
  }, LONG);

  afterAll(async () => {
    await jt?.close();
  });

  /**
   * Swaps the source into `target`; the target's face and the result's, with descriptors. Both read
   * through the same crop, placed by the target's landmarks (refineLandmarks, as the job does): the
   * detector's box on the result moves with a re-encode or a 1 px crop (208×214 at score 0.99, or
   * 151×249 at 0.55), and the landmark net with it (the mouth's gap read 0.63-0.92 of the target's).
   */
  async function swap(target: Buffer) {
    const run = runContext({ source, target }, { format: 'png' });
    const result = await jt.run(run.ctx);
    const before = await decode(target);
    const after = await decode(result.bytes);
    const original = await readFace(before, (await face(before)).landmarks);
    const swapped = await readFace(after, original.landmarks);
    return {
      before,
      after,
      original,
      swapped,
      toSource: descriptorDistance(swapped.descriptor, srcFace.descriptor!),
      wasToSource: descriptorDistance(original.descriptor, srcFace.descriptor!),
    };
  }

  it("an open-mouthed target keeps its teeth, its landmarks and its mouth's shape; the identity moves", async () => {
    // sample3's dark-haired woman: an open smile, teeth showing.
    const r = await swap(await portrait('darkHair'));
    expect(mouthGap(r.original.landmarks, faceSize(r.original.landmarks))).toBeGreaterThanOrEqual(OPEN_GAP);
    // Inside the target's inner lip contour the picture is the target's (round 2 painted closed lips over the teeth).
    expect(innerMouthDiff(r.before, r.after, r.original.landmarks)).toBeLessThan(8);
    // Pose and expression: the result's landmarks are where the target's were, the mouth's too.
    expect(landmarkError(r.original.landmarks, r.swapped.landmarks)).toBeLessThan(0.08);
    expect(landmarkError(r.original.landmarks, r.swapped.landmarks, 48, 68)).toBeLessThan(0.08);
    const gap = (lm: readonly Point[]) => mouthGap(lm, faceSize(lm));
    expect(gap(r.swapped.landmarks)).toBeGreaterThan(0.6 * gap(r.original.landmarks));
    expect(r.toSource).toBeLessThan(descriptorDistance(r.swapped.descriptor, r.original.descriptor));
    expect(r.toSource).toBeLessThan(0.45);
  });

  it("keeps the target's lower teeth, which its landmarks draw inside the lower lip band", async () => {
    const target = await portrait('darkHair');
    const before = await decode(target);
    const found = await largestFace(before, await findFaces(before, 0.5));
    const lm = await refineLandmarks(before, found.lm);
    const reach = extendForehead(lm, DEFAULT_TUNING.forehead);
    // The job's level frame, and the same frame cut from the result.
    const t = await levelled(before, lm, reach, refineLandmarks);
    const result = await jt.run(runContext({ source, target }, { format: 'png' }).ctx);
    const after = (await levelled(await decode(result.bytes), lm, reach)).image;
    // The lower teeth: the opening's light pixels (not the throat's dark) below the landmarks'
    // inner lip line and its corners' chord (60-64), and not red (a*: the lower lip's is 34, the
    // skin's 27, these teeth's 7).
    const { region, mask, dark } = openingMask(t.image, t.lm);
    const inner = rasterizePolygon(t.lm.slice(60, 68), region);
    const [a, b] = [t.lm[60]!, t.lm[64]!];
    const below = (x: number, y: number) => (b.x - a.x) * (y - a.y) - (b.y - a.y) * (x - a.x) > 0;
    let sum = 0;
    let n = 0;
    for (let y = 0; y < region.height; y++) {
      for (let x = 0; x < region.width; x++) {
        const j = y * region.width + x;
        if (mask[j]! < 3 || dark[j] || inner[j] || !below(region.left + x + 0.5, region.top + y + 0.5)) continue;
        const i = ((region.top + y) * t.image.width + region.left + x) * 3;
        const rgb = Float32Array.from(t.image.data.subarray(i, i + 3));
        if (rgbToLab(rgb)[1]! > 15) continue;
        for (let c = 0; c < 3; c++) sum += Math.abs(t.image.data[i + c]! - after.data[i + c]!);
        n++;
      }
    }
    expect(n).toBeGreaterThan(100);
    // The source's lower lip was warped over them: a mean difference of 40 levels; 0.1 now.
    expect(sum / (3 * n)).toBeLessThan(6);
  });

  it("refuses sample2's profile, naming it, where three-quarter faces swap", async () => {
    // At min_confidence 0.3 Tiny finds the profile (0.32) and SSD is not asked: its landmarks read
    // as a three-quarter face's; swapped, it came out smeared with a second eye on the background.
    const profile = runContext({ source, target: sample(2) }, { target_face_indices: [0], min_confidence: 0.3 });
    const err = await jt.run(profile.ctx).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(JobError);
    expect((err as JobError).errorType).toBe('invalid_media');
    expect((err as JobError).message).toMatch(
      /^input\.target: face 0 \(at x 3\d\d, y \d+\) is in profile; the swap needs a face turned less/,
    );
    // The most turned faces of the six photos (sample5's faces 1 and 2: nose at 0.81 and 0.70 of the
    // jaw) are replaced: the pixels inside their landmarks change.
    const target = sample(5);
    const before = await decode(target);
    const faces = leftToRight(await detectFaces(before));
    for (const index of [1, 2]) {
      const after = await decode(
        (await jt.run(runContext({ source, target }, { target_face_indices: [index] }).ctx)).bytes,
      );
      const lm = faces[index]!.landmarks;
      expect(innerDiff(before, after, lm)).toBeGreaterThan(10);
    }
  });

  it.each([25, -25])('a target rolled by %i° swaps as well as the upright one', async (deg) => {
    const upright = await swap(await portrait('darkHair'));
    const r = await swap(await rolled(await portrait('darkHair'), deg));
    // Pose and expression: the inner landmarks (brows, eyes, nose, mouth) where the target's were;
    // the jaw line less strictly, since the outline is moved towards the source's on purpose.
    expect(landmarkError(r.original.landmarks, r.swapped.landmarks, 17, 68)).toBeLessThan(0.08);
    expect(landmarkError(r.original.landmarks, r.swapped.landmarks, 0, 17)).toBeLessThan(0.15);
    expect(innerMouthDiff(r.before, r.after, r.original.landmarks)).toBeLessThan(10);
    // Identity measured upright again (face-api's descriptor crop is not rotated, so it is unreliable
    // on a rolled face): within 0.1 of the upright swap's.
    const back = await face(
      await decode(
        await sharp(await encodePng(r.after))
          .rotate(-deg)
          .png()
          .toBuffer(),
      ),
    );
    const toSource = descriptorDistance(back.descriptor!, srcFace.descriptor!);
    expect(toSource).toBeLessThan(upright.toSource + 0.1);
    expect(toSource).toBeLessThan(upright.wasToSource);
  });
});
