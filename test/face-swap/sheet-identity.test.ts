/**
 * Identity over every face of face-api's six sample photographs (the contact sheet's set,
 * bench/face-swap-sheet.ts): each face >= 100 px replaced alone, by index, through the job type,
 * from sample6's right-hand woman; plus sample3's and sample4's faces rolled by ±25°. Identity is
 * face-api's descriptor distance to the source, measured on the result at the target face.
 * Slow (about 25 swaps), no timing assertions.
 */
import { afterAll, describe, expect, it } from 'vitest';
import {
  computeDescriptor,
  descriptorDistance,
  detectLandmarks,
  refineLandmarks,
} from '../../src/processors/face-swap/detect.js';
import { createFaceSwapJobType } from '../../src/processors/face-swap/index.js';
import { runContext } from './fixtures.js';
import { decodeSheetImage, SELF_BEFORE, sheetFaces, sheetSourceFace, uprightDescriptor } from './sheet.js';

const LONG = 900_000;

/** Each rolled target and the same face upright in its photo. */
const UPRIGHT_OF: Record<string, string> = {
  'sample3 right +25° face 0': 'sample3 face 2',
  'sample3 right -25° face 0': 'sample3 face 2',
  'sample4 third +25° face 0': 'sample4 face 2',
};

describe('identity over the six sample photos', () => {
  const jt = createFaceSwapJobType();
  afterAll(() => jt.close());

  it(
    'moves no face >= 100 px away from the source, the median under 0.415, none further than 0.64',
    async () => {
      const { bytes: source, descriptor: srcDesc } = await sheetSourceFace();
      const rows: { name: string; before: number; after: number; upright: number; uprightBefore: number }[] = [];
      const refused: string[] = [];
      for await (const { target: t, image: img, index, face: f, name } of sheetFaces()) {
        const run = runContext(
          { source, target: t.bytes },
          { format: 'png', target_face_indices: [index], min_confidence: t.confidence },
        );
        const done = await jt.run(run.ctx).catch((err: unknown) => {
          if (!/is in profile/.test((err as Error).message)) throw err;
          refused.push(name);
        });
        if (!done) continue;
        const res = await decodeSheetImage(done.bytes);
        const before = descriptorDistance(srcDesc, await computeDescriptor(img, await detectLandmarks(img, f.box)));
        const after = descriptorDistance(srcDesc, await computeDescriptor(res, await detectLandmarks(res, f.box)));
        const lm = await refineLandmarks(img, await detectLandmarks(img, f.box));
        const upright = descriptorDistance(srcDesc, await uprightDescriptor(res, f.box, lm));
        const uprightBefore = descriptorDistance(srcDesc, await uprightDescriptor(img, f.box, lm));
        rows.push({ name, before, after, upright, uprightBefore });
      }
      // The source's own face (sample6, rightmost) swapped onto itself: what the pipeline alone
      // costs. It went 0.09 -> 0.30 while the source's hair fill took her brow; now 0.167 (the rest
      // is mostly the red-eye step: the source's own photo has red pupils).
      const self = rows.filter((r) => r.before <= SELF_BEFORE);
      expect(self).toHaveLength(1);
      expect(self[0]!.after).toBeLessThan(0.19);
      // Sample2's profile is refused (its smeared swap read 0.36, counted until then among the 13
      // under 0.45); the other 23 are swapped.
      expect(refused).toEqual(['sample2 face 0']);
      const others = rows.filter((r) => r.before > SELF_BEFORE);
      expect(others.length).toBeGreaterThanOrEqual(23);
      const farther = others.filter((r) => r.after > r.before + 0.01).map((r) => r.name);
      expect(farther).toEqual([]);
      const after = others.map((r) => r.after).sort((a, b) => a - b);
      // Before round 3's identity pass: median 0.515-0.52, worst 0.64, 4 under 0.45. Now median
      // 0.410 (0.416 before chroma moved relative to L* + 16), worst 0.630 (sample1's face 2, rolled
      // 47° and turned), 16 under 0.45 (15 before the lightness surface's order was chosen by
      // held-out skin, light-order.ts; the raw read of
      // a rolled face cannot go much under 0.6: the goals are read upright, below).
      expect(after[after.length - 1]!).toBeLessThan(0.64);
      expect(after[Math.floor(after.length / 2)]!).toBeLessThan(0.415);
      expect(after.filter((a) => a < 0.45).length).toBeGreaterThanOrEqual(16);
      // Read upright (uprightDescriptor: the 9 faces rolled more than 15° read in their level frame,
      // the rest as above): median 0.394, worst 0.442, every face under 0.45. Before the lightness
      // surface's order was chosen by held-out skin (light-order.ts): 0.393, 0.453 (sample5's face 3,
      // its cubic light; the quadratic's 0.442 now) and 22; 0.389, 0.459 and 22 before blown skin
      // left the chroma fits (0.392 and 0.462 before chroma moved relative to L* + 16). Before the
      // membrane followed the agreeing part of a ring that hair mostly crosses (blend.ts,
      // MIN_AGREEING): 0.388, 0.470 (sample4's face 3, now 0.440) and 21. Before: 0.396, 0.494 and 20 before the target's liner and lashes
      // were no longer kept over the new eyes, an open mouth's outer lips moved half-way and
      // lightness was matched in ln(L* + 16) (sample6 face 1 0.465 -> 0.42, sample5 face 4 0.433 ->
      // 0.36); 0.407, 0.529 and 18 before the outline move. The rolled faces swap as well as upright ones: sample1's
      // face 2 (47°) 0.43; sample3's right face +25° 0.42, -25° 0.38 (0.41 upright); sample4's third
      // +25° 0.37 (0.35 upright: it keeps its teeth now, which are the target's).
      const upright = (n: string) => others.find((r) => r.name === n)!.upright;
      const read = others.map((r) => r.upright).sort((a, b) => a - b);
      expect(read[Math.floor(read.length / 2)]!).toBeLessThan(0.395);
      expect(read[read.length - 1]!).toBeLessThan(0.45);
      expect(read.filter((a) => a < 0.45).length).toBe(read.length);
      expect(upright('sample1 face 2')).toBeLessThan(0.45);
      expect(others.filter((r) => r.upright >= r.uprightBefore).map((r) => r.name)).toEqual([]);
      for (const [rolled, of] of Object.entries(UPRIGHT_OF)) expect(upright(rolled)).toBeLessThan(upright(of) + 0.03);
    },
    LONG,
  );
});
