/**
 * The target's lower jaw and cheeks moved part of the way towards the source's outline shape, and
 * the photo around them moved along (a "liquify" of the target), so a narrowed jaw leaves no second
 * chin edge behind it and a widened one pushes the background out instead of covering it.
 */
import { rgbToLab } from './color.js';
import { boundingRegion, faceSize, noseAcross, type Region } from './geometry.js';
import type { Point, RgbImage } from './types.js';
import { triangulate, warpPiecewiseAffine } from './warp.js';

/** Share of the move each jaw point (0-16) takes: the ends, at the ears, stay; the lower jaw moves fully. */
const JAW_WEIGHT = [0, 0.25, 0.5, 0.75, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0.75, 0.5, 0.25, 0];
/** Largest move of one jaw point (of the face size): a source in another pose must not drag the outline away. */
const MAX_MOVE = 0.2;
/** Width of the ring around the jaw (of the face size) the photo is stretched over; beyond it nothing moves. */
const RING = 0.3;

/** Share of its outward move (along the eye line) the far cheek of a turned target keeps: 1 - FAR_TURN * |noseAcross - 0.5|. */
export const FAR_TURN = 3;

/** The unit vector along a face's eye line (left eye centre to right). */
function eyeLine(lm: readonly Point[]): Point {
  let x = 0;
  let y = 0;
  for (let i = 0; i < 6; i++) {
    x += lm[42 + i]!.x - lm[36 + i]!.x;
    y += lm[42 + i]!.y - lm[36 + i]!.y;
  }
  const len = Math.hypot(x, y) || 1;
  return { x: x / len, y: y / len };
}

/**
 * The target's landmarks with the jaw line (0-16) moved `amount` of the way to `aligned`'s, the
 * source's landmarks aligned to the target's inner face (the frame its features are placed in, so
 * chin and mouth stay in the source's proportion; aligned on the eyes alone, the same amounts
 * gained less). On a turned target the far cheek's outline is the silhouette of a cheek turned
 * away, narrower than a frontal source's: moved all the way out, it bulged into the hair and
 * background (sample5 face 1, sample6 face 1). There the outward part of the move (along the eye
 * line, away from the nose) is scaled by `1 - farTurn * |noseAcross - 0.5|`; inward and vertical
 * moves, and the near cheek's, stay whole.
 */
export function reshapedJaw(
  aligned: readonly Point[],
  targetLm: readonly Point[],
  amount: number,
  farTurn = FAR_TURN,
): Point[] {
  const limit = MAX_MOVE * faceSize(targetLm);
  const e = eyeLine(targetLm);
  const side = noseAcross(targetLm) - 0.5;
  const nose = targetLm[30]!;
  // Nose towards point 16: that side (9-16) is the far cheek.
  const far = (i: number) => (side > 0 ? i > 8 : i < 8);
  const keep = Math.max(0, 1 - farTurn * Math.abs(side));
  return targetLm.map((t, i) => {
    if (i >= 17 || JAW_WEIGHT[i] === 0) return t;
    const k = amount * JAW_WEIGHT[i]!;
    let mx = k * (aligned[i]!.x - t.x);
    let my = k * (aligned[i]!.y - t.y);
    if (far(i) && keep < 1) {
      const out = Math.sign((t.x - nose.x) * e.x + (t.y - nose.y) * e.y);
      const along = (mx * e.x + my * e.y) * out;
      if (along > 0) {
        mx -= (1 - keep) * along * out * e.x;
        my -= (1 - keep) * along * out * e.y;
      }
    }
    const len = Math.hypot(mx, my);
    if (len > limit) {
      mx *= limit / len;
      my *= limit / len;
    }
    return { x: t.x + mx, y: t.y + my };
  });
}

/**
 * `aligned`'s jaw (the source's, placed on the target) lowered by how much further the target's
 * mouth is open than the source's: the jaw drops with an open mouth, and a closed-mouthed source's
 * chin would otherwise be pulled up into the target's smile (the open-mouth test's smile narrowed
 * below 0.6 of its gap). Each point drops by its JAW_WEIGHT share (the jaw turns about the ears).
 */
export function droppedJaw(aligned: readonly Point[], targetLm: readonly Point[], share = 1): Point[] {
  const gap = (lm: readonly Point[]) => {
    let x = 0;
    let y = 0;
    for (const [a, b] of [
      [61, 67],
      [62, 66],
      [63, 65],
    ] as const) {
      x += (lm[b]!.x - lm[a]!.x) / 3;
      y += (lm[b]!.y - lm[a]!.y) / 3;
    }
    return { x, y };
  };
  const t = gap(targetLm);
  const s = gap(aligned);
  const len = Math.hypot(t.x, t.y) || 1;
  // Along the target's opening (down the face), never up.
  const drop = share * Math.max(0, ((t.x - s.x) * t.x + (t.y - s.y) * t.y) / len);
  return aligned.map((p, i) =>
    i < 17 ? { x: p.x + (drop * JAW_WEIGHT[i]! * t.x) / len, y: p.y + (drop * JAW_WEIGHT[i]! * t.y) / len } : p,
  );
}

/**
 * The fixed edge of the stretched ring: each jaw point pushed RING face sizes further out from the
 * nose tip, but no further than the picture's edge (a level crop of a rolled face may end before
 * the ring: the move then fades out inside the crop, not at a seam where it is pasted back).
 */
export function outlineRing(lm: readonly Point[], width: number, height: number): Point[] {
  const size = faceSize(lm);
  const c = lm[30]!;
  return lm.slice(0, 17).map((p) => {
    const len = Math.hypot(p.x - c.x, p.y - c.y) || 1;
    const dx = ((p.x - c.x) * RING * size) / len;
    const dy = ((p.y - c.y) * RING * size) / len;
    let t = 1;
    if (p.x + dx < 0) t = Math.min(t, -p.x / dx);
    if (p.x + dx > width) t = Math.min(t, (width - p.x) / dx);
    if (p.y + dy < 0) t = Math.min(t, -p.y / dy);
    if (p.y + dy > height) t = Math.min(t, (height - p.y) / dy);
    t = Math.max(0, t);
    return { x: p.x + dx * t, y: p.y + dy * t };
  });
}

/**
 * Warps `img` (in place) so the jaw points of `from` land on those of `to`: the photo in a ring
 * around the jaw is stretched with it, the inner face and everything beyond the ring stay. Pixels
 * that changed get alpha 1 in `alphaOut` (level.ts pastes the crop back by it).
 */
export function liquifyOutline(img: RgbImage, from: readonly Point[], to: readonly Point[], alphaOut?: Float32Array) {
  const ring = outlineRing(from, img.width, img.height);
  const srcPts = [...from.slice(0, 68), ...ring];
  const dstPts = [...to.slice(0, 68), ...ring];
  const region = boundingRegion(dstPts, 2, img.width, img.height);
  if (region.width < 4 || region.height < 4) return;
  // Only the triangles with a moved corner: the rest map the photo onto itself.
  const all = triangulate(dstPts);
  const moved = (i: number) => srcPts[i]!.x !== dstPts[i]!.x || srcPts[i]!.y !== dstPts[i]!.y;
  const kept: number[] = [];
  for (let t = 0; t < all.length; t += 3) {
    if (moved(all[t]!) || moved(all[t + 1]!) || moved(all[t + 2]!)) kept.push(all[t]!, all[t + 1]!, all[t + 2]!);
  }
  const { rgb, covered } = warpPiecewiseAffine(img, srcPts, dstPts, Uint32Array.from(kept), region, 'bicubic');
  const painted = paintedPixels(img, region, covered, from);
  const { width: w, height: h } = region;
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const i = y * w + x;
      if (!covered[i] || painted[i]) continue;
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

/** Radius (px) and largest range per channel (levels) of a neighbourhood called flat. */
const FLAT_RADIUS = 2;
const FLAT_RANGE = 3;

/**
 * Whether the 5×5 neighbourhood of pixel (x, y) is flat (every channel within FLAT_RANGE levels): an
 * opaque painted thing, such as the tests' bar across the lower face. Photographed skin, hair and
 * backgrounds carry noise and are seldom this flat, except where blown out or crushed to black.
 */
function isFlat(img: RgbImage, x: number, y: number): boolean {
  if (x < 0 || y < 0 || x >= img.width || y >= img.height) return false;
  const c = (y * img.width + x) * 3;
  for (let yy = Math.max(0, y - FLAT_RADIUS); yy <= Math.min(img.height - 1, y + FLAT_RADIUS); yy++) {
    for (let xx = Math.max(0, x - FLAT_RADIUS); xx <= Math.min(img.width - 1, x + FLAT_RADIUS); xx++) {
      const q = (yy * img.width + xx) * 3;
      for (let k = 0; k < 3; k++) if (Math.abs(img.data[q + k]! - img.data[c + k]!) > FLAT_RANGE) return false;
    }
  }
  return true;
}

/** Chroma distance (a*b*) from the cheeks' skin beyond which a flat pixel is a painted thing. */
const PAINT_CHROMA = 30;
/**
 * ...and of at least this chroma: JPEG crushes dark hair to flat near-black patches (kept while the
 * rest moved, they came out as a black block at sample5 face 1's jaw). A flat black, white or grey
 * thing in front is therefore not told apart, and bends with the outline.
 */
const PAINT_MIN_CHROMA = 15;

/** Mean a*b* of a 5×5 patch at `p`. */
function chromaAt(img: RgbImage, p: Point): [number, number] {
  const rgb = new Float32Array(3);
  let n = 0;
  for (let y = Math.max(0, Math.floor(p.y) - 2); y <= Math.min(img.height - 1, Math.floor(p.y) + 2); y++) {
    for (let x = Math.max(0, Math.floor(p.x) - 2); x <= Math.min(img.width - 1, Math.floor(p.x) + 2); x++) {
      for (let k = 0; k < 3; k++) rgb[k]! += img.data[(y * img.width + x) * 3 + k]!;
      n++;
    }
  }
  for (let k = 0; k < 3; k++) rgb[k] = rgb[k]! / Math.max(1, n);
  const lab = rgbToLab(rgb);
  return [lab[1]!, lab[2]!];
}

/**
 * The pixels of `region` (where `covered`) the outline move leaves as they are: flat (isFlat) and of
 * a colour far from the face's skin (read on both cheeks, between the jaw and the nose), a painted
 * thing in front such as the tests' bar. Flat alone is not enough: JPEG photos have flat patches in
 * shadows and hair (kept while the rest moved, they came out as blocks beside sample5 face 1's cheek),
 * hence the chroma bounds.
 */
function paintedPixels(img: RgbImage, region: Region, covered: Uint8Array, lm: readonly Point[]): Uint8Array {
  const mid = (a: Point, b: Point) => ({ x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 });
  const l = chromaAt(img, mid(lm[2]!, lm[31]!));
  const r = chromaAt(img, mid(lm[14]!, lm[35]!));
  const skin = [(l[0] + r[0]) / 2, (l[1] + r[1]) / 2];
  const out = new Uint8Array(region.width * region.height);
  const px = new Float32Array(3);
  for (let y = 0; y < region.height; y++) {
    for (let x = 0; x < region.width; x++) {
      const i = y * region.width + x;
      if (!covered[i] || !isFlat(img, region.left + x, region.top + y)) continue;
      const o = ((region.top + y) * img.width + region.left + x) * 3;
      for (let k = 0; k < 3; k++) px[k] = img.data[o + k]!;
      const lab = rgbToLab(px);
      const chroma = Math.hypot(lab[1]!, lab[2]!);
      if (chroma >= PAINT_MIN_CHROMA && Math.hypot(lab[1]! - skin[0]!, lab[2]! - skin[1]!) > PAINT_CHROMA) out[i] = 1;
    }
  }
  return out;
}

/** Distances (of the face size) beyond each jaw point at which a flat painted thing pins it. */
const PIN_PROBES = [0.02, 0.05, 0.08];

/**
 * `to` with each jaw point left where it was in `from` when something flat lies just beyond it (the
 * tests' bar under the chin): moved, the new face's edge would come onto the bar, where the blend's
 * soft edge tints its first rows.
 */
export function pinnedAtFlat(img: RgbImage, from: readonly Point[], to: readonly Point[]): Point[] {
  const size = faceSize(from);
  const c = from[30]!;
  return to.map((p, i) => {
    if (i >= 17) return p;
    const f = from[i]!;
    const len = Math.hypot(f.x - c.x, f.y - c.y) || 1;
    const flat = PIN_PROBES.some((d) =>
      isFlat(img, Math.floor(f.x + ((f.x - c.x) * d * size) / len), Math.floor(f.y + ((f.y - c.y) * d * size) / len)),
    );
    return flat ? f : p;
  });
}
