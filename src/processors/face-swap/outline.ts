/**
 * The target's lower jaw and cheeks moved part of the way towards the source's outline shape, and
 * the photo around them moved along (a "liquify" of the target), so a narrowed jaw leaves no second
 * chin edge behind it and a widened one pushes the background out instead of covering it.
 */
import { rgbToLab } from './color.js';
import { boundingRegion, faceSize, noseAcross, type Region } from './geometry.js';
import type { Point, RgbImage } from './types.js';
import { triangulate } from './warp.js';
import { bytes, ints } from './scratch.js';

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
 * Largest side, in grid nodes, of the grid the outline move's displacement is computed on. The
 * move is piecewise affine over triangles tens of pixels across, so a coarser grid, bilinearly
 * interpolated, is within a fraction of a pixel of it; on a close-up (a ring ~950 px wide) the
 * per-pixel triangle search and flatness test cost twice what the rest of the swap did.
 */
const FIELD_SIDE = 256;
/** A pixel whose interpolated move is smaller than this (px) is left as it is: it would round back. */
const STILL = 0.01;

/**
 * Catmull-Rom sample of `img` at index-space (x, y) inside the picture (warp.ts's sampleBicubic),
 * each channel rounded to a byte into `rgb[o..o+2]` as a Float32 store then Math.round would.
 * Returns whether it differs from the photo's pixel at byte offset `q`. Away from the picture's
 * edge (nearly every pixel of the ring) the 4×4 taps need no clamping: row-wise offsets only.
 */
function bicubicByte(img: RgbImage, x: number, y: number, rgb: Uint8Array, o: number, q: number): boolean {
  const { width: w, height: h, data } = img;
  const ix = Math.floor(x);
  const iy = Math.floor(y);
  const tx = x - ix;
  const ty = y - iy;
  const tx2 = tx * tx;
  const tx3 = tx2 * tx;
  const ty2 = ty * ty;
  const ty3 = ty2 * ty;
  // cubicWeights, inline (same expressions, same doubles).
  const a0 = 0.5 * (-tx3 + 2 * tx2 - tx);
  const a1 = 0.5 * (3 * tx3 - 5 * tx2 + 2);
  const a2 = 0.5 * (-3 * tx3 + 4 * tx2 + tx);
  const a3 = 0.5 * (tx3 - tx2);
  const b0 = 0.5 * (-ty3 + 2 * ty2 - ty);
  const b1 = 0.5 * (3 * ty3 - 5 * ty2 + 2);
  const b2 = 0.5 * (-3 * ty3 + 4 * ty2 + ty);
  const b3 = 0.5 * (ty3 - ty2);
  const stride = w * 3;
  const inside = ix >= 1 && ix + 2 < w && iy >= 1 && iy + 2 < h;
  const c0 = inside ? (ix - 1) * 3 : Math.max(0, ix - 1) * 3;
  const c1 = ix * 3;
  const c2 = inside ? c1 + 3 : Math.min(w - 1, ix + 1) * 3;
  const c3 = inside ? c1 + 6 : Math.min(w - 1, ix + 2) * 3;
  const r0 = inside ? (iy - 1) * stride : Math.max(0, iy - 1) * stride;
  const r1 = iy * stride;
  const r2 = inside ? r1 + stride : Math.min(h - 1, iy + 1) * stride;
  const r3 = inside ? r1 + 2 * stride : Math.min(h - 1, iy + 2) * stride;
  // Row by row as sampleBicubic sums them (the same order of additions: the same doubles).
  let r = b0 * (data[r0 + c0]! * a0 + data[r0 + c1]! * a1 + data[r0 + c2]! * a2 + data[r0 + c3]! * a3);
  let g = b0 * (data[r0 + c0 + 1]! * a0 + data[r0 + c1 + 1]! * a1 + data[r0 + c2 + 1]! * a2 + data[r0 + c3 + 1]! * a3);
  let b = b0 * (data[r0 + c0 + 2]! * a0 + data[r0 + c1 + 2]! * a1 + data[r0 + c2 + 2]! * a2 + data[r0 + c3 + 2]! * a3);
  r += b1 * (data[r1 + c0]! * a0 + data[r1 + c1]! * a1 + data[r1 + c2]! * a2 + data[r1 + c3]! * a3);
  g += b1 * (data[r1 + c0 + 1]! * a0 + data[r1 + c1 + 1]! * a1 + data[r1 + c2 + 1]! * a2 + data[r1 + c3 + 1]! * a3);
  b += b1 * (data[r1 + c0 + 2]! * a0 + data[r1 + c1 + 2]! * a1 + data[r1 + c2 + 2]! * a2 + data[r1 + c3 + 2]! * a3);
  r += b2 * (data[r2 + c0]! * a0 + data[r2 + c1]! * a1 + data[r2 + c2]! * a2 + data[r2 + c3]! * a3);
  g += b2 * (data[r2 + c0 + 1]! * a0 + data[r2 + c1 + 1]! * a1 + data[r2 + c2 + 1]! * a2 + data[r2 + c3 + 1]! * a3);
  b += b2 * (data[r2 + c0 + 2]! * a0 + data[r2 + c1 + 2]! * a1 + data[r2 + c2 + 2]! * a2 + data[r2 + c3 + 2]! * a3);
  r += b3 * (data[r3 + c0]! * a0 + data[r3 + c1]! * a1 + data[r3 + c2]! * a2 + data[r3 + c3]! * a3);
  g += b3 * (data[r3 + c0 + 1]! * a0 + data[r3 + c1 + 1]! * a1 + data[r3 + c2 + 1]! * a2 + data[r3 + c3 + 1]! * a3);
  b += b3 * (data[r3 + c0 + 2]! * a0 + data[r3 + c1 + 2]! * a1 + data[r3 + c2 + 2]! * a2 + data[r3 + c3 + 2]! * a3);
  const vr = toByte(r);
  const vg = toByte(g);
  const vb = toByte(b);
  rgb[o] = vr;
  rgb[o + 1] = vg;
  rgb[o + 2] = vb;
  return vr !== data[q] || vg !== data[q + 1] || vb !== data[q + 2];
}

/** A channel sum as a byte: through a Float32 first, as the Float32Array it used to be stored in. */
function toByte(v: number): number {
  const f = Math.round(Math.fround(v));
  return f < 0 ? 0 : f > 255 ? 255 : f;
}

/** The displacement of the outline move (where each pixel reads from, less where it is) on a grid over `region`. */
interface Field {
  region: Region;
  /** Pixels between nodes. */
  step: number;
  cols: number;
  rows: number;
  /** dx, dy per node, row-major; zero where no moved triangle covers the node. */
  d: Float32Array;
}

/** The triangles of `dst` (indices, 3 each) with a moved corner: the rest map the photo onto itself. */
function movedTriangles(src: readonly Point[], dst: readonly Point[]): Uint32Array {
  const all = triangulate(dst);
  const moved = (i: number) => src[i]!.x !== dst[i]!.x || src[i]!.y !== dst[i]!.y;
  const kept: number[] = [];
  for (let t = 0; t < all.length; t += 3) {
    if (moved(all[t]!) || moved(all[t + 1]!) || moved(all[t + 2]!)) kept.push(all[t]!, all[t + 1]!, all[t + 2]!);
  }
  return Uint32Array.from(kept);
}

/**
 * The piecewise-affine move of `tris` (src to dst) sampled at grid nodes (pixel centres of
 * `region`, every `step` px, one node past the far edge). It is continuous: zero on the ring and
 * on the unmoved landmarks, so zero where no moved triangle lies.
 */
function displacementField(src: readonly Point[], dst: readonly Point[], tris: Uint32Array, region: Region): Field {
  const step = Math.max(1, Math.ceil(Math.max(region.width, region.height) / FIELD_SIDE));
  const cols = Math.floor((region.width - 1) / step) + 2;
  const rows = Math.floor((region.height - 1) / step) + 2;
  const d = new Float32Array(cols * rows * 2);
  const EPS = 1e-7;
  const node = (v: number, o: number) => (v - 0.5 - o) / step;
  for (let t = 0; t < tris.length; t += 3) {
    const [d0, d1, d2] = [dst[tris[t]!]!, dst[tris[t + 1]!]!, dst[tris[t + 2]!]!];
    const [s0, s1, s2] = [src[tris[t]!]!, src[tris[t + 1]!]!, src[tris[t + 2]!]!];
    const det = (d1.y - d2.y) * (d0.x - d2.x) + (d2.x - d1.x) * (d0.y - d2.y);
    if (Math.abs(det) < 1e-9) continue;
    const inv = 1 / det;
    const i0 = Math.max(0, Math.floor(node(Math.min(d0.x, d1.x, d2.x), region.left)));
    const i1 = Math.min(cols - 1, Math.ceil(node(Math.max(d0.x, d1.x, d2.x), region.left)));
    const j0 = Math.max(0, Math.floor(node(Math.min(d0.y, d1.y, d2.y), region.top)));
    const j1 = Math.min(rows - 1, Math.ceil(node(Math.max(d0.y, d1.y, d2.y), region.top)));
    for (let j = j0; j <= j1; j++) {
      const py = region.top + j * step + 0.5;
      for (let i = i0; i <= i1; i++) {
        const px = region.left + i * step + 0.5;
        const l0 = ((d1.y - d2.y) * (px - d2.x) + (d2.x - d1.x) * (py - d2.y)) * inv;
        const l1 = ((d2.y - d0.y) * (px - d2.x) + (d0.x - d2.x) * (py - d2.y)) * inv;
        const l2 = 1 - l0 - l1;
        if (l0 < -EPS || l1 < -EPS || l2 < -EPS) continue;
        const o = (j * cols + i) * 2;
        d[o] = l0 * s0.x + l1 * s1.x + l2 * s2.x - px;
        d[o + 1] = l0 * s0.y + l1 * s1.y + l2 * s2.y - py;
      }
    }
  }
  return { region, step, cols, rows, d };
}

/**
 * Warps `img` (in place) so the jaw points of `from` land on those of `to`: the photo in a ring
 * around the jaw is stretched with it, the inner face and everything beyond the ring stay, and so
 * does a flat thing in front (heldThings). The move is computed on a grid of at most
 * FIELD_SIDE nodes a side and applied per pixel in one pass (the field bilinear, the photo
 * bicubic). Pixels that changed get alpha 1 in `alphaOut` (level.ts pastes the crop back by it).
 */
export function liquifyOutline(img: RgbImage, from: readonly Point[], to: readonly Point[], alphaOut?: Float32Array) {
  const ring = outlineRing(from, img.width, img.height);
  const srcPts = [...from.slice(0, 68), ...ring];
  const dstPts = [...to.slice(0, 68), ...ring];
  const region = boundingRegion(dstPts, 2, img.width, img.height);
  if (region.width < 4 || region.height < 4) return;
  const field = displacementField(srcPts, dstPts, movedTriangles(srcPts, dstPts), region);
  const held = heldThings(img, field, from);
  pinField(field, held.pins);
  const { rgb, changed, spans } = applyField(img, field, held);
  const { width: w, height: h } = region;
  for (let y = 0; y < h; y++) {
    for (let x = spans[y * 2]!; x < spans[y * 2 + 1]!; x++) {
      const i = y * w + x;
      if (!changed[i]) continue;
      const p = (region.top + y) * img.width + region.left + x;
      img.data[p * 3] = rgb[i * 3]!;
      img.data[p * 3 + 1] = rgb[i * 3 + 1]!;
      img.data[p * 3 + 2] = rgb[i * 3 + 2]!;
      if (alphaOut) alphaOut[p] = 1;
    }
  }
}

/**
 * The photo resampled by `field` over its region (bicubic, rounded), and where that differs from
 * the photo and is not painted (`held`). Cell by cell between the grid's nodes: a cell whose four
 * nodes do not move is skipped. `spans`: per row of the region, the columns [from, to) it resampled
 * (the rest is unchanged: the caller copies back only those).
 */
function applyField(
  img: RgbImage,
  field: Field,
  held: Held,
): { rgb: Uint8Array; changed: Uint8Array; spans: Int32Array } {
  const { region, step, cols, rows, d } = field;
  const { width: w, height: h } = region;
  const rgb = bytes(w * h * 3);
  const changed = bytes(w * h);
  const spans = ints(h * 2);
  const still = (n: number) => d[n * 2] === 0 && d[n * 2 + 1] === 0;
  for (let j = 0; j < rows - 1; j++) {
    for (let i = 0; i < cols - 1; i++) {
      const n = j * cols + i;
      if (still(n) && still(n + 1) && still(n + cols) && still(n + cols + 1)) continue;
      const paintable = held.paintCells[n] === 1;
      const y1 = Math.min(h, (j + 1) * step);
      const x1 = Math.min(w, (i + 1) * step);
      for (let y = j * step; y < y1; y++) {
        if (spans[y * 2 + 1] === 0) spans[y * 2] = i * step;
        spans[y * 2 + 1] = x1;
        const ty = (y - j * step) / step;
        // The move along this row of the cell: its left and right ends.
        const lx = d[n * 2]! + (d[(n + cols) * 2]! - d[n * 2]!) * ty;
        const ly = d[n * 2 + 1]! + (d[(n + cols) * 2 + 1]! - d[n * 2 + 1]!) * ty;
        const rx = d[(n + 1) * 2]! + (d[(n + cols + 1) * 2]! - d[(n + 1) * 2]!) * ty;
        const ry = d[(n + 1) * 2 + 1]! + (d[(n + cols + 1) * 2 + 1]! - d[(n + 1) * 2 + 1]!) * ty;
        for (let x = i * step; x < x1; x++) {
          const tx = (x - i * step) / step;
          const dx = lx + (rx - lx) * tx;
          const dy = ly + (ry - ly) * tx;
          if (Math.abs(dx) < STILL && Math.abs(dy) < STILL) continue;
          const gx = region.left + x;
          const gy = region.top + y;
          const sx = Math.min(img.width - 1, Math.max(0, gx + dx));
          const sy = Math.min(img.height - 1, Math.max(0, gy + dy));
          const r = y * w + x;
          if (bicubicByte(img, sx, sy, rgb, r * 3, (gy * img.width + gx) * 3)) changed[r] = 1;
          if (paintable && changed[r] && held.painted(gx, gy)) changed[r] = 0;
        }
      }
    }
  }
  return { rgb, changed, spans };
}

/**
 * How far a move towards a pinned node must stay from it, as a multiple of its length: a node
 * `dist` px from the nearest pin reads from no nearer than (1 - 1 / PIN_SPREAD) * dist, so no pixel
 * reads from the pinned thing, the stretch beside it stays under PIN_SPREAD / (PIN_SPREAD - 1) and
 * nothing folds (no second edge). Moves away from it are whole: the photo there is squeezed
 * against the pin's edge, as where the old painted pixels were kept and the rest moved.
 */
const PIN_SPREAD = 2;

/** Index of the nearest node of `pins` to every node of a cols × rows grid (-1 without pins): two chamfer passes carrying the pin. */
function nearestPins(pins: Uint8Array, cols: number, rows: number): Int32Array {
  const near = new Int32Array(cols * rows).fill(-1);
  // Squared distances in nodes.
  const dist = new Float64Array(cols * rows).fill(Infinity);
  for (let n = 0; n < near.length; n++) if (pins[n]) [near[n], dist[n]] = [n, 0];
  const take = (n: number, m: number) => {
    const p = near[m]!;
    if (p < 0) return;
    const dx = (p % cols) - (n % cols);
    const dy = (p - (p % cols) - (n - (n % cols))) / cols;
    const v = dx * dx + dy * dy;
    if (v < dist[n]!) {
      near[n] = p;
      dist[n] = v;
    }
  };
  for (let j = 0; j < rows; j++) {
    for (let i = 0; i < cols; i++) {
      const n = j * cols + i;
      if (i > 0) take(n, n - 1);
      if (j > 0) take(n, n - cols);
      if (j > 0 && i > 0) take(n, n - cols - 1);
      if (j > 0 && i < cols - 1) take(n, n - cols + 1);
    }
  }
  for (let j = rows - 1; j >= 0; j--) {
    for (let i = cols - 1; i >= 0; i--) {
      const n = j * cols + i;
      if (i < cols - 1) take(n, n + 1);
      if (j < rows - 1) take(n, n + cols);
      if (j < rows - 1 && i < cols - 1) take(n, n + cols + 1);
      if (j < rows - 1 && i > 0) take(n, n + cols - 1);
    }
  }
  return near;
}

/**
 * `field` held still at and beside the `pins` (nodes of a thing in front): zero within a node of
 * one (the bilinear field is then zero over it), and beyond, each move's part towards the nearest
 * pin limited (PIN_SPREAD).
 */
function pinField(field: Field, pins: Uint8Array): void {
  const { cols, rows, step, d } = field;
  if (!pins.some((v) => v)) return;
  const near = nearestPins(pins, cols, rows);
  for (let n = 0; n < cols * rows; n++) {
    const p = near[n]!;
    const ux = ((p % cols) - (n % cols)) * step;
    const uy = (Math.floor(p / cols) - Math.floor(n / cols)) * step;
    const dist = Math.hypot(ux, uy);
    if (dist <= step * Math.SQRT2 + 1e-9) {
      d[n * 2] = 0;
      d[n * 2 + 1] = 0;
      continue;
    }
    const toward = (d[n * 2]! * ux + d[n * 2 + 1]! * uy) / dist;
    const limit = (dist - step * Math.SQRT2) / PIN_SPREAD;
    if (toward <= limit) continue;
    d[n * 2] = d[n * 2]! - ((toward - limit) * ux) / dist;
    d[n * 2 + 1] = d[n * 2 + 1]! - ((toward - limit) * uy) / dist;
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
  const { width: w, data } = img;
  const c = (y * w + x) * 3;
  const x0 = Math.max(0, x - FLAT_RADIUS);
  const x1 = Math.min(w - 1, x + FLAT_RADIUS);
  const y0 = Math.max(0, y - FLAT_RADIUS);
  const y1 = Math.min(img.height - 1, y + FLAT_RADIUS);
  // The corners first (on a smooth gradient they differ most), then every pixel.
  for (let pass = 0; pass < 2; pass++) {
    const sx = pass === 0 ? Math.max(1, x1 - x0) : 1;
    const sy = pass === 0 ? Math.max(1, y1 - y0) : 1;
    for (let yy = y0; yy <= y1; yy += sy) {
      for (let xx = x0; xx <= x1; xx += sx) {
        const q = (yy * w + xx) * 3;
        if (Math.abs(data[q]! - data[c]!) > FLAT_RANGE) return false;
        if (Math.abs(data[q + 1]! - data[c + 1]!) > FLAT_RANGE) return false;
        if (Math.abs(data[q + 2]! - data[c + 2]!) > FLAT_RANGE) return false;
      }
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

/** What a flat pixel's colour says it is: a painted (coloured) thing, something neutral (black, white, grey), or skin-like. */
type FlatKind = 'paint' | 'neutral' | 'skin';

/**
 * The kind of a flat pixel by its colour, against the face's skin (read on each cheek, between the
 * jaw and the nose): of chroma PAINT_MIN_CHROMA or more and a*b* PAINT_CHROMA from both cheeks'
 * skin, paint; under PAINT_MIN_CHROMA, neutral. Kept per colour (flat things have few). Each cheek
 * on its own: a face lit in two colours has two skins. Against their mean, sample3 face 1's
 * blue-lit jaw and neck (a* -4, b* -36; her cheeks 25, 20 and 16, -19) read as paint, 44 away, and
 * were held while the photo around them moved: lilac streaks along the jaw; 26 from her blue-lit
 * cheek.
 */
function flatKinds(img: RgbImage, lm: readonly Point[]): (o: number) => FlatKind {
  const mid = (a: Point, b: Point) => ({ x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 });
  const cheeks = [chromaAt(img, mid(lm[2]!, lm[31]!)), chromaAt(img, mid(lm[14]!, lm[35]!))];
  const kinds = new Map<number, FlatKind>();
  const px = new Float32Array(3);
  return (o) => {
    const key = (img.data[o]! << 16) | (img.data[o + 1]! << 8) | img.data[o + 2]!;
    let kind = kinds.get(key);
    if (kind === undefined) {
      for (let k = 0; k < 3; k++) px[k] = img.data[o + k]!;
      const lab = rgbToLab(px);
      const chroma = Math.hypot(lab[1]!, lab[2]!);
      const far = cheeks.every((c) => Math.hypot(lab[1]! - c[0], lab[2]! - c[1]) > PAINT_CHROMA);
      kind = chroma < PAINT_MIN_CHROMA ? 'neutral' : far ? 'paint' : 'skin';
      kinds.set(key, kind);
    }
    return kind;
  };
}

/** What holds still in the outline move: grid nodes to pin, and whether a pixel is painted. */
interface Held {
  /** Nodes on a neutral flat thing under the chin (chinThings): the move is pinned there. */
  pins: Uint8Array;
  /** Cells (by their top-left node) with a painted node at or beside a corner: only there can a pixel be painted. */
  paintCells: Uint8Array;
  /** Whether the pixel at (x, y) is flat and painted (flatKinds). */
  painted: (x: number, y: number) => boolean;
}

/**
 * What of the photo in the ring is in front of the face, and must not bend with the outline:
 * flat (isFlat) painted pixels (flatKinds), such as the tests' bar, are left as they are, pixel by
 * pixel, while the rest moves; a flat neutral thing in one piece under the chin (chinThings), such
 * as a black scarf or a white collar across the jaw, is pinned in the field. A neutral flat patch
 * elsewhere (a blown-out background beside the cheek, crushed shadow or hair) is neither: it must
 * stretch with the outline, and kept while the rest moved, JPEG's flat shadows came out as blocks
 * (sample5 face 1).
 */
function heldThings(img: RgbImage, field: Field, lm: readonly Point[]): Held {
  const { region, step, cols, rows } = field;
  const kindOf = flatKinds(img, lm);
  const paint = new Uint8Array(cols * rows);
  const neutral = new Uint8Array(cols * rows);
  for (let j = 0; j < rows; j++) {
    const y = Math.min(img.height - 1, region.top + j * step);
    for (let i = 0; i < cols; i++) {
      const x = Math.min(img.width - 1, region.left + i * step);
      if (!isFlat(img, x, y)) continue;
      const kind = kindOf((y * img.width + x) * 3);
      if (kind === 'paint') paint[j * cols + i] = 1;
      else if (kind === 'neutral') neutral[j * cols + i] = 1;
    }
  }
  const pins = new Uint8Array(cols * rows);
  for (const n of chinThings(img, field, neutral, lm)) pins[n] = 1;
  // A cell may hold painted pixels when a node within one of its corners is painted.
  const paintCells = new Uint8Array(cols * rows);
  for (let n = 0; n < paint.length; n++) {
    if (!paint[n]) continue;
    const i = n % cols;
    const j = (n - i) / cols;
    for (let jj = Math.max(0, j - 2); jj <= Math.min(rows - 1, j + 1); jj++)
      for (let ii = Math.max(0, i - 2); ii <= Math.min(cols - 1, i + 1); ii++) paintCells[jj * cols + ii] = 1;
  }
  return { pins, paintCells, painted: (x, y) => isFlat(img, x, y) && kindOf((y * img.width + x) * 3) === 'paint' };
}

/** Distances (of the face size) beyond each jaw point at which a flat painted thing pins it. */
const PIN_PROBES = [0.02, 0.05, 0.08];
/** Largest difference per channel between neighbouring flat nodes of one thing. */
const SAME_THING = 2 * FLAT_RANGE;
/** Jaw points whose probes (CHIN_REACH along the line from the nose) find a thing under the chin: the chin and its sides. */
const CHIN = [6, 7, 8, 9, 10];
/**
 * From where to where (of the face size, beyond each CHIN point) a neutral thing under the chin is
 * looked for: a little inside, since the detector's chin can sit on a thin band across it (a 6 px
 * white strap on the tests' portrait: the chin point 2-7 px below its top), out to the farthest of
 * PIN_PROBES.
 */
const CHIN_REACH = [-0.04, Math.max(...PIN_PROBES)] as const;
/** Least area (of the face size squared) of a neutral flat thing under the chin that is pinned. */
const MIN_THING = 0.01;

/**
 * Share of its bounding box a neutral thing under the chin fills: a bar, a collar, a scarf in one
 * flat colour fill theirs (the tests' bars 1.0); crushed dark hair or clothes are ragged (sample5
 * face 1's under its chin 0.46, 6% of the face size squared: pinned, it cost that face 0.005).
 */
const MIN_FILL = 0.75;

/** Whether `piece` (node indices of a grid `cols` wide) fills MIN_FILL of its bounding box. */
function solid(piece: readonly number[], cols: number): boolean {
  let [x0, x1, y0, y1] = [Infinity, -Infinity, Infinity, -Infinity];
  for (const n of piece) {
    const x = n % cols;
    const y = (n - x) / cols;
    [x0, x1, y0, y1] = [Math.min(x0, x), Math.max(x1, x), Math.min(y0, y), Math.max(y1, y)];
  }
  return piece.length >= MIN_FILL * (x1 - x0 + 1) * (y1 - y0 + 1);
}

/**
 * The `neutral` nodes in pieces (4-connected, neighbours within SAME_THING levels) that lie just
 * beyond the chin (every node along CHIN_REACH from the CHIN points), cover MIN_THING of the face size
 * squared and are solid (MIN_FILL): a scarf, a collar or a bar in front of the jaw. The detector's
 * jaw hugs the top of such a thing (it hides the chin), so it lies under the chin whatever it
 * covers; a background or a shadow beside the cheek does not reach there, and is left to stretch.
 */
function chinThings(img: RgbImage, field: Field, neutral: Uint8Array, lm: readonly Point[]): number[] {
  const { region, step, cols, rows } = field;
  const size = faceSize(lm);
  const at = (n: number) =>
    (Math.min(img.height - 1, region.top + Math.floor(n / cols) * step) * img.width +
      Math.min(img.width - 1, region.left + (n % cols) * step)) *
    3;
  const same = (a: number, b: number) => {
    const p = at(a);
    const q = at(b);
    for (let k = 0; k < 3; k++) if (Math.abs(img.data[p + k]! - img.data[q + k]!) > SAME_THING) return false;
    return true;
  };
  const seen = new Uint8Array(cols * rows);
  const out: number[] = [];
  const c = lm[30]!;
  // Every node along each probe's line, not three points on it: a thin band (a strap, a cable)
  // lies between them, and the detector's chin can sit on it rather than above it.
  const [from, to] = CHIN_REACH;
  const probes = Math.ceil(((to - from) * size) / step);
  for (const i of CHIN) {
    const f = lm[i]!;
    const len = Math.hypot(f.x - c.x, f.y - c.y) || 1;
    for (let k = 0; k <= probes; k++) {
      const d = from + ((to - from) * k) / probes;
      const gi = Math.round((f.x + ((f.x - c.x) * d * size) / len - 0.5 - region.left) / step);
      const gj = Math.round((f.y + ((f.y - c.y) * d * size) / len - 0.5 - region.top) / step);
      if (gi < 0 || gj < 0 || gi >= cols || gj >= rows) continue;
      const start = gj * cols + gi;
      if (!neutral[start] || seen[start]) continue;
      const piece = [start];
      seen[start] = 1;
      for (let k = 0; k < piece.length; k++) {
        const n = piece[k]!;
        const x = n % cols;
        for (const m of [x > 0 ? n - 1 : -1, x < cols - 1 ? n + 1 : -1, n - cols, n + cols]) {
          if (m < 0 || m >= seen.length || seen[m] || !neutral[m] || !same(n, m)) continue;
          seen[m] = 1;
          piece.push(m);
        }
      }
      if (piece.length * step * step >= MIN_THING * size * size && solid(piece, cols))
        for (const n of piece) out.push(n);
    }
  }
  return out;
}

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
