/**
 * The target's lower jaw and cheeks moved part of the way towards the source's outline shape, and
 * the photo around them moved along (a "liquify" of the target), so a narrowed jaw leaves no second
 * chin edge behind it and a widened one pushes the background out instead of covering it.
 */
import { boundingRegion, faceSize } from './geometry.js';
import type { Point, RgbImage } from './types.js';
import { triangulate, warpPiecewiseAffine } from './warp.js';

/** Share of the move each jaw point (0-16) takes: the ends, at the ears, stay; the lower jaw moves fully. */
const JAW_WEIGHT = [0, 0.25, 0.5, 0.75, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0.75, 0.5, 0.25, 0];
/** Largest move of one jaw point (of the face size): a source in another pose must not drag the outline away. */
const MAX_MOVE = 0.08;
/** Width of the ring around the jaw (of the face size) the photo is stretched over; beyond it nothing moves. */
const RING = 0.3;

function mean(lm: readonly Point[], from: number, to: number): Point {
  let x = 0;
  let y = 0;
  for (let i = from; i < to; i++) {
    x += lm[i]!.x;
    y += lm[i]!.y;
  }
  return { x: x / (to - from), y: y / (to - from) };
}

/**
 * The target's landmarks with the jaw line (0-16) moved `amount` of the way to the source's, both
 * read in the frame of their eyes (source eye centres mapped onto the target's: the eye distance as
 * the unit, the eye line as the axis).
 */
export function reshapedJaw(srcLm: readonly Point[], targetLm: readonly Point[], amount: number): Point[] {
  const sl = mean(srcLm, 36, 42);
  const sr = mean(srcLm, 42, 48);
  const tl = mean(targetLm, 36, 42);
  const tr = mean(targetLm, 42, 48);
  // Complex factor a = (tr - tl) / (sr - sl): rotation and scale.
  const dx = sr.x - sl.x;
  const dy = sr.y - sl.y;
  const ex = tr.x - tl.x;
  const ey = tr.y - tl.y;
  const n = dx * dx + dy * dy || 1;
  const ar = (ex * dx + ey * dy) / n;
  const ai = (ey * dx - ex * dy) / n;
  const limit = MAX_MOVE * faceSize(targetLm);
  return targetLm.map((t, i) => {
    if (i >= 17 || JAW_WEIGHT[i] === 0) return t;
    const qx = srcLm[i]!.x - sl.x;
    const qy = srcLm[i]!.y - sl.y;
    const k = amount * JAW_WEIGHT[i]!;
    let mx = k * (tl.x + ar * qx - ai * qy - t.x);
    let my = k * (tl.y + ai * qx + ar * qy - t.y);
    const len = Math.hypot(mx, my);
    if (len > limit) {
      mx *= limit / len;
      my *= limit / len;
    }
    return { x: t.x + mx, y: t.y + my };
  });
}

/**
 * Warps `img` (in place) so the jaw points of `from` land on those of `to`: the photo in a ring
 * around the jaw is stretched with it, the inner face and everything beyond the ring stay. Pixels
 * that changed get alpha 1 in `alphaOut` (level.ts pastes the crop back by it).
 */
export function liquifyOutline(img: RgbImage, from: readonly Point[], to: readonly Point[], alphaOut?: Float32Array) {
  const size = faceSize(from);
  const c = from[30]!;
  const ring = from.slice(0, 17).map((p) => {
    const len = Math.hypot(p.x - c.x, p.y - c.y) || 1;
    const k = (RING * size) / len;
    return { x: p.x + (p.x - c.x) * k, y: p.y + (p.y - c.y) * k };
  });
  const srcPts = [...from.slice(0, 68), ...ring];
  const dstPts = [...to.slice(0, 68), ...ring];
  const region = boundingRegion(dstPts, 2, img.width, img.height);
  if (region.width < 4 || region.height < 4) return;
  const { rgb, covered } = warpPiecewiseAffine(img, srcPts, dstPts, triangulate(dstPts), region, 'bicubic');
  const { width: w, height: h } = region;
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const i = y * w + x;
      if (!covered[i]) continue;
      const p = (region.top + y) * img.width + region.left + x;
      let changed = false;
      for (let k = 0; k < 3; k++) {
        const v = Math.round(rgb[i * 3 + k]!);
        if (v !== img.data[p * 3 + k]) changed = true;
        img.data[p * 3 + k] = v;
      }
      if (changed && alphaOut) alphaOut[p] = 1;
    }
  }
}
