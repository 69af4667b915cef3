/**
 * Visible flaws on face-api's sample photographs, each swapped through the job type as a user would
 * (the contact sheet's source, or the README example's pair) and measured where the flaw was seen:
 * a painted dot kept as if it were hair, a bluish nose tip from the source's coloured light.
 * Slow (a few swaps with the models), no timing assertions.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { rgbToLab } from '../../src/processors/face-swap/color.js';
import { findLargeFaces, largestFaceLandmarks, refineLandmarks } from '../../src/processors/face-swap/detect.js';
import { createFaceSwapJobType } from '../../src/processors/face-swap/index.js';
import type { Point, RgbImage } from '../../src/processors/face-swap/types.js';
import { exampleFaces, runContext, sample, sheetSource } from './fixtures.js';
import { spotDarkness } from './measure.js';
import { decodeSheetImage } from './sheet.js';

const LONG = 300_000;

/** Mean CIELAB colour of the disc of radius r at c. */
function discLab(img: RgbImage, c: Point, r: number): [number, number, number] {
  const m: [number, number, number] = [0, 0, 0];
  let n = 0;
  for (let y = Math.floor(c.y - r); y <= c.y + r; y++) {
    for (let x = Math.floor(c.x - r); x <= c.x + r; x++) {
      if (Math.hypot(x - c.x, y - c.y) > r) continue;
      const o = (y * img.width + x) * 3;
      const lab = rgbToLab(Float32Array.of(img.data[o]!, img.data[o + 1]!, img.data[o + 2]!));
      for (let k = 0; k < 3; k++) m[k] = m[k]! + lab[k]!;
      n++;
    }
  }
  return [m[0] / n, m[1] / n, m[2] / n];
}

describe('visible flaws on the sample photos', () => {
  const jt = createFaceSwapJobType();
  afterAll(() => jt.close());

  it(
    "replaces the clown dot at the edge of sample1 face 0's cheek: a mark on the skin, not hair",
    async () => {
      const run = runContext(
        { source: await sheetSource(), target: sample(1) },
        { format: 'png', target_face_indices: [0] },
      );
      const res = await decodeSheetImage((await jt.run(run.ctx)).bytes);
      // The dot (at x 432, y 503 of sample1.jpg, radius ~5 px) is 23 L units darker than the skin
      // around it in the photo. It joined the thin dark strip along the turned face's jaw line (the
      // background inside the outline), which reaches the outline, and was kept in front of the new
      // face as hair: 25 units darker there. Replaced, 3.
      expect(spotDarkness(await decodeSheetImage(sample(1)), { x: 432, y: 503 }, 4)).toBeGreaterThan(18);
      expect(spotDarkness(res, { x: 432, y: 503 }, 4)).toBeLessThan(10);
    },
    LONG,
  );

  it(
    "keeps the README example's nose tip the target's colour, not the source's blue light",
    async () => {
      // The README example's pair (bench/face-swap-example.ts): sample3's middle woman, lit blue from
      // her left, into sample6's right-hand woman.
      const { source, target } = await exampleFaces();
      const res = await decodeSheetImage((await jt.run(runContext({ source, target }, { format: 'png' }).ctx)).bytes);
      const img = await decodeSheetImage(target);
      const lm = await refineLandmarks(img, await largestFaceLandmarks(img, await findLargeFaces(img, 0.5)));
      const tip = lm[30]!;
      const want = discLab(img, tip, 4);
      const got = discLab(res, tip, 4);
      // The source's tip catches her blue light sharper than the 10 % chroma blur follows: b* 12.1
      // against the target's 15.9, a bluish-grey patch at 2x. The source's mid-scale b*, where it
      // is bluer than its surroundings by more than the target's departs from its own, is now held
      // to that (recolor.ts): b* 15.4.
      expect(Math.abs(got[2] - want[2])).toBeLessThan(2);
    },
    LONG,
  );
});
