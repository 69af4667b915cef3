/**
 * Bringing a face swapped at the work size (swap.ts) back to the photo's resolution: only over the
 * extent of its alpha, bicubic inside, premultiplied bilinear at the edge.
 */
import type { ColorStats } from './swap.js';
import type { Region } from './geometry.js';
import { cubicWeights } from './warp.js';

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
  // Small-image coordinates of S's pixels: R's origin is the small image's; r.region lies inside it.
  const rl = r.region.left - (S.left - R.left) / kx;
  const rt = r.region.top - (S.top - R.top) / ky;
  const face = new Float32Array(S.width * S.height * 3);
  const alpha = new Float32Array(S.width * S.height);
  const ra = r.alpha;
  const rf = r.face;
  const cx = new Float64Array(4);
  const cy = new Float64Array(4);
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
    if (rowsIn) cubicWeights(fy, cy);
    for (let x = 0; x < S.width; x++) {
      const u = (x + 0.5) / kx - 0.5 - rl;
      if (u <= -1 || u >= rw) continue;
      const x0 = Math.floor(u);
      const fx = u - x0;
      const o = y * S.width + x;
      if (rowsIn && x0 >= 1 && x0 + 2 < rw && opaque16(ra, rw, x0 - 1, y0 - 1)) {
        cubicWeights(fx, cx);
        let cr = 0;
        let cg = 0;
        let cb = 0;
        for (let j = 0; j < 4; j++) {
          const row = (y0 - 1 + j) * rw + x0 - 1;
          for (let i = 0; i < 4; i++) {
            const k = cx[i]! * cy[j]!;
            const q = (row + i) * 3;
            cr += rf[q]! * k;
            cg += rf[q + 1]! * k;
            cb += rf[q + 2]! * k;
          }
        }
        alpha[o] = 1;
        face[o * 3] = cr;
        face[o * 3 + 1] = cg;
        face[o * 3 + 2] = cb;
        continue;
      }
      const xa = x0 < 0 ? 0 : x0;
      const xb = x0 + 1 >= rw ? rw - 1 : x0 + 1;
      const wx0 = x0 < 0 ? 0 : 1 - fx;
      const wx1 = x0 + 1 >= rw ? 0 : fx;
      const i00 = ya * rw + xa;
      const i01 = ya * rw + xb;
      const i10 = yb * rw + xa;
      const i11 = yb * rw + xb;
      const w00 = wx0 * wy0 * ra[i00]!;
      const w01 = wx1 * wy0 * ra[i01]!;
      const w10 = wx0 * wy1 * ra[i10]!;
      const w11 = wx1 * wy1 * ra[i11]!;
      const a = w00 + w01 + w10 + w11;
      if (a <= 0) continue;
      alpha[o] = a;
      for (let c = 0; c < 3; c++) {
        face[o * 3 + c] =
          (w00 * rf[i00 * 3 + c]! + w01 * rf[i01 * 3 + c]! + w10 * rf[i10 * 3 + c]! + w11 * rf[i11 * 3 + c]!) / a;
      }
    }
  }
  return { face, alpha };
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

/** Whether the 4x4 block of `alpha` (row length `w`) starting at (x, y) is fully opaque. */
function opaque16(alpha: Float32Array, w: number, x: number, y: number): boolean {
  for (let j = 0; j < 4; j++) {
    const row = (y + j) * w + x;
    if (alpha[row]! < 1 || alpha[row + 1]! < 1 || alpha[row + 2]! < 1 || alpha[row + 3]! < 1) return false;
  }
  return true;
}
