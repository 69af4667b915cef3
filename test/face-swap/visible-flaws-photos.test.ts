/**
 * Visible flaws on face-api's sample photographs, each swapped through the job type as a user would
 * (the contact sheet's source, or the README example's pair) and measured where the flaw was seen:
 * a painted dot kept as if it were hair, a bluish nose tip from the source's coloured light.
 * Slow (a few swaps with the models), no timing assertions.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { rgbToLab } from '../../src/processors/face-swap/color.js';
import { findLargeFaces, largestFaceLandmarks, refineLandmarks } from '../../src/processors/face-swap/detect.js';
import { faceSize } from '../../src/processors/face-swap/geometry.js';
import { rasterizePolygon } from '../../src/processors/face-swap/mask.js';
import { createFaceSwapJobType } from '../../src/processors/face-swap/index.js';
import type { Point, RgbImage } from '../../src/processors/face-swap/types.js';
import { exampleFaces, runContext, sample, sheetSource } from './fixtures.js';
import { discLab, spotDarkness } from './measure.js';
import { decodeSheetImage, sheetSwap } from './sheet.js';

const LONG = 300_000;

/**
 * The skin's fine texture in the patch `poly` (landmark-placed), as a ratio: the spread of ln(L* + 16)
 * about its own local mean (a box 3 % of the face size wide). A pattern on the skin under a dimmer
 * light keeps its contrast as a ratio, not in L* units; strands and streaks raise it.
 */
function textureContrast(img: RgbImage, lm: readonly Point[], poly: readonly Point[]): number {
  const r = Math.max(2, Math.round(0.015 * faceSize(lm)));
  const xs = poly.map((p) => p.x);
  const ys = poly.map((p) => p.y);
  const left = Math.floor(Math.min(...xs)) - r;
  const top = Math.floor(Math.min(...ys)) - r;
  const region = {
    left,
    top,
    width: Math.ceil(Math.max(...xs)) + r - left + 1,
    height: Math.ceil(Math.max(...ys)) + r - top + 1,
  };
  const { width: w, height: h } = region;
  const lnL = new Float64Array(w * h);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const o = ((top + y) * img.width + left + x) * 3;
      const L = rgbToLab(Float32Array.of(img.data[o]!, img.data[o + 1]!, img.data[o + 2]!))[0]!;
      lnL[y * w + x] = Math.log(L + 16);
    }
  }
  const inside = rasterizePolygon(poly, region);
  let s = 0;
  let ss = 0;
  let n = 0;
  for (let y = r; y < h - r; y++) {
    for (let x = r; x < w - r; x++) {
      if (!inside[y * w + x]) continue;
      let m = 0;
      for (let dy = -r; dy <= r; dy++) for (let dx = -r; dx <= r; dx++) m += lnL[(y + dy) * w + x + dx]!;
      const d = lnL[y * w + x]! - m / (2 * r + 1) ** 2;
      s += d;
      ss += d * d;
      n++;
    }
  }
  return Math.sqrt(Math.max(0, ss / n - (s / n) ** 2));
}

/** The cheek on the image's left (between the eye, the nose, the mouth corner and the jaw), shrunk to 80 %. */
const mid = (p: Point, q: Point, t = 0.5): Point => ({ x: p.x + t * (q.x - p.x), y: p.y + t * (q.y - p.y) });

function leftCheek(lm: readonly Point[]): Point[] {
  const poly = [1, 2, 3, 4, 48, 31, 40, 41, 36].map((i) => lm[i]!);
  const c = poly.reduce((a, p) => ({ x: a.x + p.x / poly.length, y: a.y + p.y / poly.length }), { x: 0, y: 0 });
  return poly.map((p) => ({ x: c.x + 0.8 * (p.x - c.x), y: c.y + 0.8 * (p.y - c.y) }));
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

  // The README example's pair (bench/face-swap-example.ts): sample3's middle woman, lit blue from
  // her left, into sample6's right-hand woman; swapped once for the tests below.
  let example: Promise<{ img: RgbImage; res: RgbImage; lm: Point[] }> | undefined;
  const exampleSwap = () =>
    (example ??= (async () => {
      const { source, target } = await exampleFaces();
      const res = await decodeSheetImage((await jt.run(runContext({ source, target }, { format: 'png' }).ctx)).bytes);
      const img = await decodeSheetImage(target);
      const lm = await refineLandmarks(img, await largestFaceLandmarks(img, await findLargeFaces(img, 0.5)));
      return { img, res, lm };
    })());

  it(
    "keeps the README example's nose tip the target's colour, not the source's blue light",
    async () => {
      const { img, res, lm } = await exampleSwap();
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

  it(
    "gives the README example's nose no lilac patch: against the cheeks, its b* is the target's and its a* the source's",
    async () => {
      const { img, res, lm } = await exampleSwap();
      const r = Math.max(2, Math.round(0.02 * faceSize(lm)));
      const nose = [lm[30]!, mid(lm[33]!, lm[30]!, 0.3), mid(lm[31]!, lm[32]!), mid(lm[35]!, lm[34]!)];
      // Each cheek between the nose's side, the jaw and the lower lid.
      const cheeks = [
        [31, 2, 40],
        [35, 14, 47],
      ].map(([n, j, e]) => mid(mid(lm[n!]!, lm[j!]!, 0.55), lm[e!]!, 0.25));
      const relation = (im: RgbImage) => {
        const mean = (ps: Point[]) =>
          ps
            .map((p) => discLab(im, p, r))
            .reduce<number[]>((a, l) => a.map((v, k) => v + l[k]! / ps.length), [0, 0, 0]);
        const [n, c] = [mean(nose), mean(cheeks)];
        return { a: n[1]! - c[1]!, b: n[2]! - c[2]! };
      };
      const [want, got] = [relation(img), relation(res)];
      // The source's light spreads her skin along b* (its light axis, 80 deg from a*: light-axis.ts);
      // her nose tip caught the blue one: b* 8 against her cheeks' 16-39. Taken off at the 10 %
      // low-pass only, the nose came out 5.5 b* below the cheeks (the target's: 2.9 above), greyish
      // lilac at 2x; along the axis at the scale of her light (3 %), 2.2 above. Across the axis the
      // nose stays redder than the cheeks, as hers is (3.3 across, a* 2.1 in the result).
      expect(Math.abs(got.b - want.b)).toBeLessThan(2.5);
      expect(got.a).toBeGreaterThan(0.5);
    },
    LONG,
  );

  it(
    "gives the README example's right inner eye corner no brown patch: the skin's colour around it",
    async () => {
      const { res, lm } = await exampleSwap();
      // Just outside the lower lid by the inner corner (landmarks 42, 47), against the skin 8-14 px
      // around it outside the eye.
      const at = mid(mid(lm[42]!, lm[47]!), { x: 2 * lm[47]!.x - lm[43]!.x, y: 2 * lm[47]!.y - lm[43]!.y }, 0.3);
      const eye = rasterizePolygon(lm.slice(42, 48), { left: 0, top: 0, width: res.width, height: res.height });
      const ring: [number, number][] = [];
      for (let y = Math.floor(at.y - 14); y <= at.y + 14; y++) {
        for (let x = Math.floor(at.x - 14); x <= at.x + 14; x++) {
          const d = Math.hypot(x - at.x, y - at.y);
          if (d < 8 || d > 14 || eye[y * res.width + x]) continue;
          const l = discLab(res, { x, y }, 0);
          ring.push([l[1], l[2]]);
        }
      }
      const around = [0, 1].map((k) => ring.reduce((s, v) => s + v[k]! / ring.length, 0));
      const corner = discLab(res, at, 3);
      // The source's corner is in the shadow of her blue light, 11 b* warmer than the blue-lit
      // skin around it; kept as the corner's own colour (compressed to 0.75), it came out a brown
      // patch, chroma 5.6 from the skin around (the target's own corner: 1.3). Along her light axis
      // that difference is light (color.ts settleChroma): 1.2.
      expect(Math.hypot(corner[1] - around[0]!, corner[2] - around[1]!)).toBeLessThan(3);
    },
    LONG,
  );

  it(
    "moves sample3 face 1's blue-lit neck with her jaw: no lilac streaks held where her old cheek was",
    async () => {
      const { target, result, lm } = await sheetSwap(jt, 3, 1);
      // The band inside her right jaw (landmarks 9-14, a fifth of the way to the nose tip), where the
      // narrower new jaw leaves the photo stretched in from the neck: the share of neighbouring
      // pixels whose a* steps by more than 4.
      const band = [9, 10, 11, 12, 13, 14].map((i) => lm[i]!);
      const poly = [...band, ...band.map((p) => mid(p, lm[30]!, 0.2)).reverse()];
      const inBand = rasterizePolygon(poly, { left: 0, top: 0, width: target.width, height: target.height });
      const steps = (img: RgbImage) => {
        const a = (i: number) => rgbToLab(Float32Array.from(img.data.subarray(i * 3, i * 3 + 3)))[1]!;
        let n = 0;
        let big = 0;
        for (let i = 0; i < inBand.length; i++) {
          if (!inBand[i] || !inBand[i + 1] || !inBand[i + img.width]) continue;
          for (const j of [i + 1, i + img.width]) {
            n++;
            if (Math.abs(a(j) - a(i)) > 4) big++;
          }
        }
        return big / n;
      };
      // Her blue-lit jaw and neck (a* -4, b* -36), 44 a*b* from her two cheeks' mean, were taken
      // for a flat painted thing and held pixel by pixel while the rest moved: 0.038 against the
      // photo's 0.007 (lilac steps at 2x). Against each cheek on its own (outline.ts flatKinds;
      // 26 from her blue-lit one) they move: 0.014 (the new jaw's edge).
      expect(steps(result)).toBeLessThan(3 * steps(target));
    },
    LONG,
  );

  it(
    "keeps the source's skin texture as a ratio on sample5's dark faces: no pale or dark strands",
    async () => {
      // The sheet's source (skin L* ~71) into sample5's faces 0 and 1 (L* ~29 and ~45). Matched in
      // L* (mean shifted, spread stretched up to 1.33), her flash-lit texture came out with its L*
      // contrast on skin three times darker: pale and dark strands along face 1's jaw, a pale band
      // beside face 0's nose. In ln(L* + 16), as a change of light acts (recolor.ts), the ratio stays.
      // Texture of the result's left cheek over the target's: face 0 1.18 -> 0.81, face 1 3.01 -> 1.76
      // (the target's cheek is very smooth).
      const bounds = [1.0, 2.2];
      for (const index of [0, 1]) {
        const { target, result, lm } = await sheetSwap(jt, 5, index);
        const ratio = textureContrast(result, lm, leftCheek(lm)) / textureContrast(target, lm, leftCheek(lm));
        expect(ratio).toBeLessThan(bounds[index]!);
      }
    },
    LONG,
  );
});
