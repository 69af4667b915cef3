/**
 * The canonical frame: a rolled face (head tilted sideways) is swapped in a crop rotated so that
 * its eyes are level, where the landmark net and every face-shaped rule of the swap (forehead
 * "up", feature zones, occluder tests) work as on an upright face, and the result is pasted back.
 */
import type { ColorStats } from './color.js';
import { composite } from './blend.js';
import { boundingRegion, extents, type Region } from './geometry.js';
import { DEFAULT_TUNING, extendForehead, sharpenToMatch, swapFace, type SwapOptions, type SwapTuning } from './swap.js';
import type { Point, RgbImage } from './types.js';
import { sampleBicubic } from './warp.js';

/** A square crop of an image, rotated by `angle` about the crop's centre `c` (image pixels). */
export interface LevelFrame {
  image: RgbImage;
  /** Centre of the crop in the original image. */
  c: Point;
  /** Roll (radians) the crop undoes: the original's eye line points at this angle. */
  angle: number;
}

/**
 * Rolls smaller than this are swapped in place: the landmark net and the swap cope with them, and
 * the crop's two resamplings cost more than they give (reference case: 0.386 in place, 0.405 level).
 */
export const MIN_ROLL = (15 * Math.PI) / 180;

function centre(lm: readonly Point[], from: number, to: number): Point {
  let x = 0;
  let y = 0;
  for (let i = from; i < to; i++) {
    x += lm[i]!.x;
    y += lm[i]!.y;
  }
  return { x: x / (to - from), y: y / (to - from) };
}

/** The face's roll: angle of the line from its left eye (36-41, image left) to its right (42-47). */
export function rollOf(lm: readonly Point[]): number {
  const l = centre(lm, 36, 42);
  const r = centre(lm, 42, 48);
  return Math.atan2(r.y - l.y, r.x - l.x);
}

/** Original-image point of crop point `q`. */
export function fromLevel(f: LevelFrame, q: Point): Point {
  const h = f.image.width / 2;
  const cos = Math.cos(f.angle);
  const sin = Math.sin(f.angle);
  const x = q.x - h;
  const y = q.y - h;
  return { x: f.c.x + cos * x - sin * y, y: f.c.y + sin * x + cos * y };
}

/** Crop point of original-image point `p`. */
export function toLevel(f: LevelFrame, p: Point): Point {
  const h = f.image.width / 2;
  const cos = Math.cos(f.angle);
  const sin = Math.sin(f.angle);
  const x = p.x - f.c.x;
  const y = p.y - f.c.y;
  return { x: h + cos * x + sin * y, y: h - sin * x + cos * y };
}

/**
 * A level crop around the face at `lm` (and `reach`, points that must fit in it, e.g. the forehead),
 * with room around them for the swap's margins.
 */
export function levelFrame(img: RgbImage, lm: readonly Point[], reach: readonly Point[] = lm): LevelFrame {
  const angle = rollOf(lm);
  const { x0, y0, x1, y1 } = extents(lm);
  const c = { x: (x0 + x1) / 2, y: (y0 + y1) / 2 };
  let r = 0;
  for (const p of reach) r = Math.max(r, Math.hypot(p.x - c.x, p.y - c.y));
  const side = Math.max(8, Math.ceil(2 * r * 1.25));
  const image: RgbImage = { width: side, height: side, data: new Uint8Array(side * side * 3) };
  const f: LevelFrame = { image, c, angle };
  const wx = new Float64Array(4);
  const wy = new Float64Array(4);
  const px = new Float32Array(3);
  for (let y = 0; y < side; y++) {
    for (let x = 0; x < side; x++) {
      const p = fromLevel(f, { x: x + 0.5, y: y + 0.5 });
      sampleBicubic(img, p.x - 0.5, p.y - 0.5, wx, wy, px, 0);
      const o = (y * side + x) * 3;
      // Uint8ClampedArray semantics by hand: the crop is a plain RgbImage.
      for (let k = 0; k < 3; k++) image.data[o + k] = Math.min(255, Math.max(0, Math.round(px[k]!)));
    }
  }
  return f;
}

/** Bilinear sample of a single-channel plane (0 outside it). */
function sampleAlpha(a: Float32Array, side: number, x: number, y: number): number {
  const fx = x - 0.5;
  const fy = y - 0.5;
  const ix = Math.floor(fx);
  const iy = Math.floor(fy);
  const tx = fx - ix;
  const ty = fy - iy;
  const at = (xx: number, yy: number) => (xx < 0 || yy < 0 || xx >= side || yy >= side ? 0 : a[yy * side + xx]!);
  return (
    (1 - ty) * ((1 - tx) * at(ix, iy) + tx * at(ix + 1, iy)) +
    ty * ((1 - tx) * at(ix, iy + 1) + tx * at(ix + 1, iy + 1))
  );
}

/**
 * The swapped crop back in the original's pixels: colour and alpha over the region its non-zero
 * alpha covers (bicubic colour, bilinear alpha), or undefined if it covers nothing.
 */
export function unlevel(
  target: RgbImage,
  f: LevelFrame,
  alpha: Float32Array,
): { region: Region; face: Float32Array; alpha: Float32Array } | undefined {
  const side = f.image.width;
  const corners = [
    { x: 0, y: 0 },
    { x: side, y: 0 },
    { x: 0, y: side },
    { x: side, y: side },
  ].map((q) => fromLevel(f, q));
  const region = boundingRegion(corners, 1, target.width, target.height);
  const { width: w, height: h } = region;
  if (w <= 0 || h <= 0) return undefined;
  const face = new Float32Array(w * h * 3);
  const out = new Float32Array(w * h);
  const wx = new Float64Array(4);
  const wy = new Float64Array(4);
  let any = false;
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const q = toLevel(f, { x: region.left + x + 0.5, y: region.top + y + 0.5 });
      const a = sampleAlpha(alpha, side, q.x, q.y);
      if (a <= 0) continue;
      any = true;
      out[y * w + x] = Math.min(1, a);
      sampleBicubic(f.image, q.x - 0.5, q.y - 0.5, wx, wy, face, (y * w + x) * 3);
    }
  }
  return any ? { region, face, alpha: out } : undefined;
}

/** Landmarks found again on a picture, starting from a first guess (detect.ts's refineLandmarks). */
export type Refit = (img: RgbImage, lm: readonly Point[]) => Promise<Point[]>;

/**
 * A face as the swap wants it: level. Rolled more than MIN_ROLL, it is cut out level (with room for
 * `reach`) and, given `refit`, its landmarks are found again there, where the net sees an upright face.
 */
export async function levelled(
  img: RgbImage,
  lm: readonly Point[],
  reach: readonly Point[],
  refit?: Refit,
): Promise<{ frame?: LevelFrame; image: RgbImage; lm: Point[] }> {
  if (Math.abs(rollOf(lm)) < MIN_ROLL) return { image: img, lm: [...lm] };
  const frame = levelFrame(img, lm, reach);
  let inFrame = lm.map((p) => toLevel(frame, p));
  if (refit) inFrame = await refit(frame.image, inFrame);
  return { frame, image: frame.image, lm: inFrame };
}

/**
 * swapFace in the target face's level frame: rolled faces are swapped in a level crop and pasted
 * back by the alpha the swap wrote with (nothing else of `target` changes). The source should
 * already be level (see `levelled`).
 */
export async function swapLevelled(
  target: RgbImage,
  targetLm: readonly Point[],
  source: RgbImage,
  srcLm: readonly Point[],
  opts: SwapOptions,
  refit?: Refit,
  tuning: SwapTuning = DEFAULT_TUNING,
): Promise<ColorStats | undefined> {
  const reach = extendForehead(targetLm, tuning.forehead);
  const dst = await levelled(target, targetLm, reach, refit);
  if (!dst.frame) return swapFace(target, targetLm, source, srcLm, opts, tuning);
  const alpha = new Float32Array(dst.image.width * dst.image.height);
  // The picture's faces in the crop, and the face's new outline back in the picture's pixels.
  const frame = dst.frame;
  const keepOut = opts.keepOut?.map((z) => z.map((p) => toLevel(frame, p)));
  const stats = await swapFace(dst.image, dst.lm, source, srcLm, { ...opts, alphaOut: alpha, keepOut }, tuning);
  for (const z of keepOut?.slice(opts.keepOut!.length) ?? []) opts.keepOut!.push(z.map((p) => fromLevel(frame, p)));
  const back = unlevel(target, dst.frame, alpha);
  if (!back) return stats;
  // The crop was resampled twice (there and back): sharpened again to the photo's own detail.
  if (!tuning.skip?.includes('detail')) sharpenToMatch(target, back.region, back.face, back.alpha);
  composite(target, back.region, back.face, back.alpha);
  return stats;
}
