/**
 * Bringing a face swapped at the work size (swap.ts) back to the photo's resolution: only over the
 * extent of its alpha, bicubic inside, premultiplied bilinear at the edge.
 */
import type { ColorStats } from './color.js';
import type { Region } from './geometry.js';
import { cubicWeights } from './warp.js';
import { bytes, floats } from './scratch.js';

/** A rendered face before it is written into the target: region-sized colour and final alpha. */
export interface Rendered {
  region: Region;
  face: Float32Array;
  alpha: Float32Array;
  stats: ColorStats | undefined;
}

/**
 * The rendered face at full size over `S` (default: all of `R`, the region the small copy was made
 * of, `kx`/`ky` full pixels per small pixel). Inside the face (all 16 taps fully opaque) bicubic, which keeps what
 * detail there is; near the edge bilinear with colour premultiplied by alpha, so the uncovered
 * surroundings never bleed into the face. Alpha stays 0 wherever all four taps are 0, so an
 * occluder kept at the small scale is kept exactly here too.
 */
export function upsampleFace(
  r: Rendered,
  R: Region,
  kx: number,
  ky: number,
  S: Region = R,
): { face: Float32Array; alpha: Float32Array } {
  const { width: rw, height: rh } = r.region;
  const W = S.width;
  // Small-image coordinates of S's pixels: R's origin is the small image's; r.region lies inside it.
  const rl = r.region.left - (S.left - R.left) / kx;
  const rt = r.region.top - (S.top - R.top) / ky;
  const face = floats(W * S.height * 3);
  const alpha = floats(W * S.height);
  const ra = r.alpha;
  const rf = r.face;
  // Per output column, once: its taps and weights (every row uses the same).
  const col = columnTaps(W, kx, rl, rw);
  const opaque = opaqueBlocks(ra, rw, rh);
  const rowAlongX = rowsAlongX(rf, rw, W, col);
  const cy = new Float64Array(4);
  const out = { face, alpha };
  for (let y = 0; y < S.height; y++) {
    const v = (y + 0.5) / ky - 0.5 - rt;
    if (v <= -1 || v >= rh) continue;
    const y0 = Math.floor(v);
    const fy = v - y0;
    const ya = y0 < 0 ? 0 : y0;
    const yb = y0 + 1 >= rh ? rh - 1 : y0 + 1;
    const wy0 = y0 < 0 ? 0 : 1 - fy;
    const wy1 = y0 + 1 >= rh ? 0 : fy;
    const rowsIn = y0 >= 1 && y0 + 2 < rh;
    const rows = { ya, yb, wy0, wy1 };
    let h0: Float32Array | undefined;
    let h1: Float32Array | undefined;
    let h2: Float32Array | undefined;
    let h3: Float32Array | undefined;
    if (rowsIn) cubicWeights(fy, cy);
    // The row's weights as locals: read from the typed array per pixel, they were not hoisted.
    const k0 = cy[0]!;
    const k1 = cy[1]!;
    const k2 = cy[2]!;
    const k3 = cy[3]!;
    const blockRow = (y0 - 1) * rw;
    for (let x = 0; x < W; x++) {
      if (!col.inside[x]) continue;
      const x0 = col.x0[x]!;
      const o = y * W + x;
      if (rowsIn && col.cubic[x] && opaque[blockRow + x0 - 1]) {
        if (!h0) {
          h0 = rowAlongX(y0 - 1);
          h1 = rowAlongX(y0);
          h2 = rowAlongX(y0 + 1);
          h3 = rowAlongX(y0 + 2);
        }
        alpha[o] = 1;
        const q = x * 3;
        const p = o * 3;
        face[p] = k0 * h0[q]! + k1 * h1![q]! + k2 * h2![q]! + k3 * h3![q]!;
        face[p + 1] = k0 * h0[q + 1]! + k1 * h1![q + 1]! + k2 * h2![q + 1]! + k3 * h3![q + 1]!;
        face[p + 2] = k0 * h0[q + 2]! + k1 * h1![q + 2]! + k2 * h2![q + 2]! + k3 * h3![q + 2]!;
        continue;
      }
      premultipliedBilinear(r, col, x, rows, out, o);
    }
  }
  return { face, alpha };
}

type Columns = ReturnType<typeof columnTaps>;

/**
 * Bicubic is separable: each small row is interpolated along x once (into a ring of the 4 rows a
 * full row needs), then each full pixel combines 4 of those instead of 16 taps. Returns small row
 * j interpolated at every output column (valid until 4 other rows have been asked for).
 */
function rowsAlongX(rf: Float32Array, rw: number, W: number, col: Columns): (j: number) => Float32Array {
  const ring = Array.from({ length: 4 }, () => floats(W * 3));
  const ringRow = new Int32Array(4).fill(-1);
  return (j) => {
    const h = ring[j & 3]!;
    if (ringRow[j & 3] === j) return h;
    ringRow[j & 3] = j;
    for (let x = 0; x < W; x++) {
      if (!col.cubic[x]) continue;
      const q = (j * rw + col.x0[x]! - 1) * 3;
      const w0 = col.cw[x * 4]!;
      const w1 = col.cw[x * 4 + 1]!;
      const w2 = col.cw[x * 4 + 2]!;
      const w3 = col.cw[x * 4 + 3]!;
      const o = x * 3;
      h[o] = w0 * rf[q]! + w1 * rf[q + 3]! + w2 * rf[q + 6]! + w3 * rf[q + 9]!;
      h[o + 1] = w0 * rf[q + 1]! + w1 * rf[q + 4]! + w2 * rf[q + 7]! + w3 * rf[q + 10]!;
      h[o + 2] = w0 * rf[q + 2]! + w1 * rf[q + 5]! + w2 * rf[q + 8]! + w3 * rf[q + 11]!;
    }
    return h;
  };
}

/**
 * Output pixel `o` (column x) near the face's edge: bilinear over the small rows ya/yb (weights
 * wy0/wy1) with colour premultiplied by alpha, so the uncovered surroundings never bleed in.
 */
function premultipliedBilinear(
  r: Rendered,
  col: Columns,
  x: number,
  rows: { ya: number; yb: number; wy0: number; wy1: number },
  out: { face: Float32Array; alpha: Float32Array },
  o: number,
): void {
  const { width: rw } = r.region;
  const ra = r.alpha;
  const rf = r.face;
  const xa = col.xa[x]!;
  const xb = col.xb[x]!;
  const wx0 = col.wx0[x]!;
  const wx1 = col.wx1[x]!;
  const i00 = rows.ya * rw + xa;
  const i01 = rows.ya * rw + xb;
  const i10 = rows.yb * rw + xa;
  const i11 = rows.yb * rw + xb;
  const w00 = wx0 * rows.wy0 * ra[i00]!;
  const w01 = wx1 * rows.wy0 * ra[i01]!;
  const w10 = wx0 * rows.wy1 * ra[i10]!;
  const w11 = wx1 * rows.wy1 * ra[i11]!;
  const a = w00 + w01 + w10 + w11;
  if (a <= 0) return;
  out.alpha[o] = a;
  for (let c = 0; c < 3; c++) {
    out.face[o * 3 + c] =
      (w00 * rf[i00 * 3 + c]! + w01 * rf[i01 * 3 + c]! + w10 * rf[i10 * 3 + c]! + w11 * rf[i11 * 3 + c]!) / a;
  }
}

/** Per output column: the small column left of it, bilinear taps and weights, Catmull-Rom weights. */
function columnTaps(W: number, kx: number, rl: number, rw: number) {
  const x0s = new Int32Array(W);
  const inside = new Uint8Array(W);
  const cubic = new Uint8Array(W);
  const xa = new Int32Array(W);
  const xb = new Int32Array(W);
  const wx0 = new Float64Array(W);
  const wx1 = new Float64Array(W);
  const cw = new Float64Array(W * 4);
  const w4 = new Float64Array(4);
  for (let x = 0; x < W; x++) {
    const u = (x + 0.5) / kx - 0.5 - rl;
    if (u <= -1 || u >= rw) continue;
    inside[x] = 1;
    const x0 = Math.floor(u);
    const fx = u - x0;
    x0s[x] = x0;
    xa[x] = x0 < 0 ? 0 : x0;
    xb[x] = x0 + 1 >= rw ? rw - 1 : x0 + 1;
    wx0[x] = x0 < 0 ? 0 : 1 - fx;
    wx1[x] = x0 + 1 >= rw ? 0 : fx;
    if (x0 >= 1 && x0 + 2 < rw) {
      cubic[x] = 1;
      cubicWeights(fx, w4);
      cw.set(w4, x * 4);
    }
  }
  return { x0: x0s, inside, cubic, xa, xb, wx0, wx1, cw };
}

/** 1 at (x, y) when the 4x4 block of `alpha` starting there is fully opaque (a min filter, separable). */
function opaqueBlocks(alpha: Float32Array, w: number, h: number): Uint8Array {
  const rows = bytes(w * h);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x + 3 < w; x++) {
      const i = y * w + x;
      rows[i] = alpha[i]! >= 1 && alpha[i + 1]! >= 1 && alpha[i + 2]! >= 1 && alpha[i + 3]! >= 1 ? 1 : 0;
    }
  }
  const out = bytes(w * h);
  for (let y = 0; y + 3 < h; y++) {
    for (let x = 0; x < w; x++) {
      const i = y * w + x;
      out[i] = rows[i]! & rows[i + w]! & rows[i + 2 * w]! & rows[i + 3 * w]!;
    }
  }
  return out;
}

/**
 * The part of `R` (full resolution) where the upsampled face can have alpha > 0: the extent of the
 * rendered alpha, one small pixel wider (the bilinear taps), in full pixels. Undefined when none.
 */
export function opaqueExtent(r: Rendered, R: Region, kx: number, ky: number): Region | undefined {
  const { width: rw, height: rh } = r.region;
  let x0 = rw;
  let x1 = -1;
  let y0 = rh;
  let y1 = -1;
  for (let y = 0; y < rh; y++) {
    for (let x = 0; x < rw; x++) {
      if (r.alpha[y * rw + x]! <= 0) continue;
      if (x < x0) x0 = x;
      if (x > x1) x1 = x;
      if (y < y0) y0 = y;
      if (y > y1) y1 = y;
    }
  }
  if (x1 < 0) return undefined;
  // Small pixel centre c maps to full coordinate (c + 0.5) * k - 0.5.
  const left = Math.max(0, Math.floor((r.region.left + x0 - 1 + 0.5) * kx - 0.5));
  const top = Math.max(0, Math.floor((r.region.top + y0 - 1 + 0.5) * ky - 0.5));
  const right = Math.min(R.width, Math.ceil((r.region.left + x1 + 1 + 0.5) * kx - 0.5) + 1);
  const bottom = Math.min(R.height, Math.ceil((r.region.top + y1 + 1 + 0.5) * ky - 0.5) + 1);
  return { left: R.left + left, top: R.top + top, width: right - left, height: bottom - top };
}
