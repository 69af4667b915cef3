/**
 * Red-eye removal on real faces of face-api's sample photos: the contact sheet's source (sample6's
 * right-hand woman, flash-red pupils) is fixed, and faces without red-eye whose warm-lit lids and
 * brown irises a red-over-green threshold took for red pupils (a black blob in the eye once swapped)
 * are left exactly as they are.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { rgbToLab } from '../../src/processors/face-swap/color.js';
import { detectLandmarks, findFaces, leftToRight, refineLandmarks } from '../../src/processors/face-swap/detect.js';
import { boundingRegion, type Region } from '../../src/processors/face-swap/geometry.js';
import { removeRedEye } from '../../src/processors/face-swap/redeye.js';
import type { Point, RgbImage } from '../../src/processors/face-swap/types.js';
import { sample } from './fixtures.js';
import { decodeSheetImage, sheetSourceFace } from './sheet.js';

interface Face {
  rgb: Float32Array;
  lm: Point[];
  region: Region;
}

/** The face's region (its landmarks' box) as float RGB, as the swap hands the warped source to the step. */
function faceOf(img: RgbImage, lm: Point[]): Face {
  const region = boundingRegion(lm, 2, img.width, img.height);
  const rgb = new Float32Array(region.width * region.height * 3);
  for (let y = 0; y < region.height; y++) {
    for (let x = 0; x < region.width * 3; x++) {
      rgb[y * region.width * 3 + x] = img.data[((region.top + y) * img.width + region.left) * 3 + x]!;
    }
  }
  return { rgb, lm, region };
}

/** Face `index` (left to right, as a user picks it) of sample photo `n`. */
async function sampleFace(n: 1 | 2 | 3 | 4 | 5 | 6, index: number): Promise<Face> {
  const img = await decodeSheetImage(sample(n));
  const face = leftToRight(await findFaces(img, n === 2 ? 0.3 : 0.5))[index]!;
  return faceOf(img, await refineLandmarks(img, await detectLandmarks(img, face.box)));
}

/** Pixels of red (a* >= 18, hue under ~40 degrees) within the eye openings' boxes. */
function redInEyes(f: Face): number {
  const lab = rgbToLab(f.rgb);
  let n = 0;
  for (const [from, to] of [
    [36, 42],
    [42, 48],
  ] as const) {
    const xs = f.lm.slice(from, to).map((p) => p.x - f.region.left);
    const ys = f.lm.slice(from, to).map((p) => p.y - f.region.top);
    for (let y = Math.floor(Math.min(...ys)); y <= Math.ceil(Math.max(...ys)); y++) {
      for (let x = Math.floor(Math.min(...xs)); x <= Math.ceil(Math.max(...xs)); x++) {
        const o = (y * f.region.width + x) * 3;
        if (lab[o + 1]! >= 18 && lab[o + 2]! <= 0.8 * lab[o + 1]!) n++;
      }
    }
  }
  return n;
}

describe('red-eye removal', () => {
  let source: Face;
  beforeAll(async () => {
    const s = await sheetSourceFace();
    source = faceOf(s.image, await refineLandmarks(s.image, s.lm));
  });

  it("fixes the sheet source's flash-red pupils", () => {
    const f = { ...source, rgb: source.rgb.slice() };
    const before = redInEyes(f);
    expect(before).toBeGreaterThan(30);
    expect(removeRedEye(f.rgb, f.lm, f.region)).toBeGreaterThan(150);
    expect(redInEyes(f)).toBeLessThan(0.1 * before);
  });

  // Faces a red-over-green threshold changed (the eye of sample4's face 3 turned into a black blob).
  it.each([
    [4, 3],
    [5, 2],
    [6, 1],
    [2, 1],
  ] as const)('leaves sample%i face %i, which has no red-eye, untouched', async (n, index) => {
    const f = await sampleFace(n, index);
    const before = f.rgb.slice();
    expect(removeRedEye(f.rgb, f.lm, f.region)).toBe(0);
    expect(f.rgb).toEqual(before);
  });
});
