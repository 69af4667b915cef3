/**
 * Identity over every face of face-api's six sample photographs (the contact sheet's set,
 * bench/face-swap-sheet.ts): each face >= 100 px replaced alone, by index, through the job type,
 * from sample6's right-hand woman; plus sample3's and sample4's faces rolled by ±25°. Identity is
 * face-api's descriptor distance to the source, measured on the result at the target face.
 * Slow (about 25 swaps), no timing assertions.
 */
import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';
import {
  computeDescriptor,
  descriptorDistance,
  detectLandmarks,
  findFaces,
  largestFaceLandmarks,
  leftToRight,
} from '../../src/processors/face-swap/detect.js';
import { decodeImage } from '../../src/processors/face-swap/image.js';
import { createFaceSwapJobType } from '../../src/processors/face-swap/index.js';
import { PORTRAITS, runContext, sample, type Rect } from './fixtures.js';

const LONG = 900_000;
const decode = (bytes: Buffer | Uint8Array) => decodeImage(bytes, 'test', 1e9);

async function rolled(n: 3 | 4, r: Rect, deg: number): Promise<Buffer> {
  const c = await sharp(sample(n)).extract(r).toBuffer();
  return sharp(c).rotate(deg, { background: '#808080' }).jpeg({ quality: 95 }).toBuffer();
}

/** The contact sheet's targets; sample2's profile scores 0.32, so that photo is searched at 0.3. */
async function targets(): Promise<{ name: string; bytes: Buffer; confidence: number }[]> {
  const out = ([1, 2, 3, 4, 5, 6] as const).map((n) => ({
    name: `sample${n}`,
    bytes: sample(n),
    confidence: n === 2 ? 0.3 : 0.5,
  }));
  const dark = PORTRAITS.darkHair.rect;
  out.push({ name: 'sample3 right +25°', bytes: await rolled(3, dark, 25), confidence: 0.5 });
  out.push({ name: 'sample3 right -25°', bytes: await rolled(3, dark, -25), confidence: 0.5 });
  out.push({ name: 'sample4 third +25°', bytes: await rolled(4, PORTRAITS.sample4third.rect, 25), confidence: 0.5 });
  return out;
}

describe('identity over the six sample photos', () => {
  const jt = createFaceSwapJobType();
  afterAll(() => jt.close());

  it(
    'moves no face >= 100 px away from the source, and none ends further than 0.65 from it',
    async () => {
      const source = await sharp(sample(6)).extract(PORTRAITS.brunette.rect).jpeg({ quality: 95 }).toBuffer();
      const srcImg = await decode(source);
      const srcDesc = await computeDescriptor(srcImg, await largestFaceLandmarks(srcImg, await findFaces(srcImg, 0.5)));
      const rows: { name: string; before: number; after: number }[] = [];
      for (const t of await targets()) {
        const img = await decode(t.bytes);
        const faces = leftToRight(await findFaces(img, t.confidence));
        for (const [index, f] of faces.entries()) {
          if (Math.max(f.box.width, f.box.height) < 100) continue;
          const run = runContext(
            { source, target: t.bytes },
            { format: 'png', target_face_indices: [index], min_confidence: t.confidence },
          );
          const res = await decode((await jt.run(run.ctx)).bytes);
          const before = descriptorDistance(srcDesc, await computeDescriptor(img, await detectLandmarks(img, f.box)));
          const after = descriptorDistance(srcDesc, await computeDescriptor(res, await detectLandmarks(res, f.box)));
          rows.push({ name: `${t.name} face ${index}`, before, after });
        }
      }
      // The source's own face (sample6, rightmost) is in the set but says nothing about transfer.
      const others = rows.filter((r) => r.before > 0.3);
      expect(others.length).toBeGreaterThanOrEqual(24);
      // Every face nearer the source is not reached: sample1's face 2 stays at 0.64.
      const farther = others.filter((r) => r.after > r.before + 0.01).map((r) => r.name);
      expect(farther).toEqual([]);
      const after = others.map((r) => r.after).sort((a, b) => a - b);
      // Before round 3's quality work: sample1's face 2 (rolled 47°) went 0.64 -> 0.68, further
      // from the source. Now the worst is 0.64 and the median 0.515-0.52 (the goal, < 0.40, is not met).
      expect(after[after.length - 1]!).toBeLessThan(0.65);
      expect(after[Math.floor(after.length / 2)]!).toBeLessThan(0.53);
    },
    LONG,
  );
});
