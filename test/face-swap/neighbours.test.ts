/**
 * Two faces cheek to cheek (sample3's two women, cut out and set side by side with a small gap): the
 * outline move's ring around one face's jaw (outline.ts) must not reach the other (guard.ts).
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectLandmarks, findFaces, leftToRight, loadFaceModels } from '../../src/processors/face-swap/detect.js';
import { convexHull } from '../../src/processors/face-swap/geometry.js';
import { rasterizePolygon } from '../../src/processors/face-swap/mask.js';
import { extendForehead } from '../../src/processors/face-swap/swap.js';
import { decodeImage } from '../../src/processors/face-swap/image.js';
import { createFaceSwapJobType, type FaceSwapJobType } from '../../src/processors/face-swap/index.js';
import type { Box, Point, RgbImage } from '../../src/processors/face-swap/types.js';
import { portrait, runContext, sample } from './fixtures.js';

const LONG = 240_000;
/** Gap (px) between the two cut-out heads. */
const GAP = 8;

const decode = (bytes: Uint8Array) => decodeImage(bytes, 'test', 1e8);

/** sample3's curly blonde and dark-haired woman, each cut close to her cheeks, side by side (PNG). */
async function twoHeads(): Promise<Buffer> {
  const s3 = sample(3);
  const cut = (left: number, top: number, width: number) =>
    sharp(s3).extract({ left, top, width, height: 480 }).png().toBuffer();
  // Faces at x 585-785 and 1514-1684 of sample3: 20 px of cheek outside each, 10 px towards the gap.
  const a = await cut(565, 180, 230);
  const b = await cut(1504, 140, 200);
  return sharp({ create: { width: 230 + GAP + 200, height: 480, channels: 3, background: '#6a6a6a' } })
    .composite([
      { input: a, left: 0, top: 0 },
      { input: b, left: 230 + GAP, top: 0 },
    ])
    .png()
    .toBuffer();
}

/** Pixels of `box` (whole pixels it touches; only those inside `hull`, if given) that differ between two pictures. */
function changedIn(a: RgbImage, b: RgbImage, box: Box, hull?: Point[]): number {
  const region = { left: 0, top: 0, width: a.width, height: a.height };
  const inside = hull ? rasterizePolygon(hull, region) : undefined;
  let n = 0;
  for (let y = Math.max(0, Math.floor(box.y)); y < Math.min(a.height, Math.ceil(box.y + box.height)); y++) {
    for (let x = Math.max(0, Math.floor(box.x)); x < Math.min(a.width, Math.ceil(box.x + box.width)); x++) {
      if (inside && !inside[y * a.width + x]) continue;
      const o = (y * a.width + x) * 3;
      if (a.data[o] !== b.data[o] || a.data[o + 1] !== b.data[o + 1] || a.data[o + 2] !== b.data[o + 2]) n++;
    }
  }
  return n;
}

describe('image-face-swap leaves neighbouring faces alone', { timeout: LONG }, () => {
  let jt: FaceSwapJobType;
  let source: Buffer;
  let target: Buffer;
  let original: RgbImage;
  let boxes: Box[];

  beforeAll(async () => {
    jt = createFaceSwapJobType();
    await Promise.all([jt.warmup(), loadFaceModels()]);
    // sample6's brunette: a narrower jaw than either target, so both outlines move.
    source = await portrait('brunette');
    target = await twoHeads();
    original = await decode(target);
    boxes = leftToRight(await findFaces(original, 0.5)).map((f) => f.box);
    expect(boxes).toHaveLength(2);
  }, LONG);

  afterAll(async () => {
    await jt?.close();
  });

  async function swap(indices: number[]): Promise<RgbImage> {
    const run = runContext({ source, target }, { format: 'png', target_face_indices: indices });
    return decode((await jt.run(run.ctx)).bytes);
  }

  it("swapping one face leaves the other's box bit-identical, in either order; both swapped, neither bends the other", async () => {
    const left = await swap([0]);
    const right = await swap([1]);
    // Each swap did change its own face.
    expect(changedIn(original, left, boxes[0]!)).toBeGreaterThan(1000);
    expect(changedIn(original, right, boxes[1]!)).toBeGreaterThan(1000);
    expect(changedIn(original, left, boxes[1]!)).toBe(0);
    expect(changedIn(original, right, boxes[0]!)).toBe(0);
    // Both, one after the other (each order): each face exactly as when swapped alone.
    for (const order of [
      [0, 1],
      [1, 0],
    ]) {
      const both = await swap(order);
      expect(changedIn(left, both, boxes[0]!)).toBe(0);
      expect(changedIn(right, both, boxes[1]!)).toBe(0);
    }
  });

  it('keeps out of the neighbour in the level frame too (both heads rolled 25°)', async () => {
    const rolled = await sharp(target).rotate(25, { background: '#6a6a6a' }).png().toBuffer();
    const image = await decode(rolled);
    const found = leftToRight(await findFaces(image, 0.5)).map((f) => f.box);
    expect(found).toHaveLength(2);
    // Rolled, each box reaches over the other's cheek: the other face is its landmarks' hull here.
    const hulls: Point[][] = [];
    for (const box of found) hulls.push(convexHull(extendForehead(await detectLandmarks(image, box), 0.2)));
    for (const [index, other] of [
      [0, 1],
      [1, 0],
    ] as const) {
      const run = runContext({ source, target: rolled }, { format: 'png', target_face_indices: [index] });
      const result = await decode((await jt.run(run.ctx)).bytes);
      expect(changedIn(image, result, found[index]!)).toBeGreaterThan(1000);
      expect(changedIn(image, result, found[other]!, hulls[other])).toBe(0);
    }
  });
});
