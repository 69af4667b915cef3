/**
 * A greyscale target stays grey: the swapped face takes no colour the target does not have (sample3
 * into a greyscale copy of sample6 came out with blue-teal brows and eyes and a bluish cast, chroma
 * up to 126 of 255 in the face's box).
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findFaces } from '../../src/processors/face-swap/detect.js';
import { keepTargetGrey } from '../../src/processors/face-swap/grey.js';
import { decodeImage } from '../../src/processors/face-swap/image.js';
import { createFaceSwapJobType, type FaceSwapJobType } from '../../src/processors/face-swap/index.js';
import type { Box, RgbImage } from '../../src/processors/face-swap/types.js';
import { runContext, sample } from './fixtures.js';

const LONG = 240_000;

/** Chroma (max - min channel) of every pixel of `box`, sorted. */
function chromaIn(img: RgbImage, box: Box): number[] {
  const c: number[] = [];
  for (let y = Math.max(0, Math.round(box.y)); y < Math.min(img.height, box.y + box.height); y++) {
    for (let x = Math.max(0, Math.round(box.x)); x < Math.min(img.width, box.x + box.width); x++) {
      const o = (y * img.width + x) * 3;
      const [r, g, b] = [img.data[o]!, img.data[o + 1]!, img.data[o + 2]!];
      c.push(Math.max(r, g, b) - Math.min(r, g, b));
    }
  }
  return c.sort((a, b) => a - b);
}

describe('image-face-swap into a greyscale target', { timeout: LONG }, () => {
  let jt: FaceSwapJobType;

  beforeAll(async () => {
    jt = createFaceSwapJobType();
    await jt.warmup();
  }, LONG);

  afterAll(async () => {
    await jt?.close();
  });

  it('keeps the face as grey as the target', async () => {
    const target = await sharp(sample(6)).grayscale().jpeg({ quality: 90 }).toBuffer();
    const result = await jt.run(runContext({ source: sample(3), target }, { format: 'png' }).ctx);
    const before = await decodeImage(target, 'test', 1e9);
    const after = await decodeImage(result.bytes, 'test', 1e9);
    const largest = (await findFaces(before, 0.5))[0]!.box;
    // The face was replaced (not left as it was)...
    let changed = 0;
    for (let i = 0; i < before.data.length; i++) changed += before.data[i] !== after.data[i] ? 1 : 0;
    expect(changed).toBeGreaterThan(0.1 * largest.width * largest.height);
    // ...and has no colour: the target's own face is 0 at the 99th percentile.
    const c = chromaIn(after, largest);
    expect(c[Math.floor(0.99 * (c.length - 1))]).toBeLessThanOrEqual(2);
    expect(c[c.length - 1]).toBeLessThanOrEqual(8);
  });

  it('leaves a coloured target’s face colour alone', () => {
    // Skin-coloured target (chroma 60), a bluish face: untouched.
    const n = 16;
    const target = new Float32Array(n * 3).map((_, i) => [200, 160, 140][i % 3]!);
    const face = new Float32Array(n * 3).map((_, i) => [120, 140, 200][i % 3]!);
    const copy = Float32Array.from(face);
    expect(keepTargetGrey(face, target, new Uint8Array(n).fill(1))).toBeUndefined();
    expect(face).toEqual(copy);
    // A grey target: the same face loses its colour, keeping its luma.
    const grey = new Float32Array(n * 3).fill(150);
    expect(keepTargetGrey(face, grey, new Uint8Array(n).fill(1))).toBe(0);
    const luma = 0.299 * 120 + 0.587 * 140 + 0.114 * 200;
    for (const v of face) expect(v).toBeCloseTo(luma, 3);
  });
});
