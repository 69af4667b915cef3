/**
 * Piecewise-affine warp: the target's landmarks are triangulated (Delaunay), and every target pixel
 * inside a triangle is mapped back into the matching source triangle by that triangle's affine map
 * and sampled bilinearly. Inverse mapping leaves no holes; one triangulation drives both images, so
 * the triangles correspond one to one.
 */
import Delaunator from 'delaunator';
import type { Region } from './geometry.js';
import type { Point, RgbImage } from './types.js';
import { bytes, floats } from './scratch.js';

/** Triangle vertex indices (3 per triangle) of the Delaunay triangulation of `points`. */
export function triangulate(points: readonly Point[]): Uint32Array {
  // Delaunator only reads the array; its typing asks for a mutable one.
  return Delaunator.from(
    points as Point[],
    (p) => p.x,
    (p) => p.y,
  ).triangles;
}

export interface WarpResult {
  /** Warped RGB, float, region-sized (width * height * 3). */
  rgb: Float32Array;
  /** 1 where a triangle covered the pixel (i.e. inside the hull of the landmarks). */
  covered: Uint8Array;
}

/** Catmull-Rom weights of the 4 taps around a sample at fraction t (sum 1; sharper than bilinear). */
export function cubicWeights(t: number, w: Float64Array): void {
  const t2 = t * t;
  const t3 = t2 * t;
  w[0] = 0.5 * (-t3 + 2 * t2 - t);
  w[1] = 0.5 * (3 * t3 - 5 * t2 + 2);
  w[2] = 0.5 * (-3 * t3 + 4 * t2 + t);
  w[3] = 0.5 * (t3 - t2);
}

/**
 * Catmull-Rom (4x4 taps, edges replicated) sample of `img` at index-space position (x, y) (pixel
 * centre - 0.5) into out[o..o+2], unclamped. `wx`, `wy`: 4-element scratch for the weights.
 */
export function sampleBicubic(
  img: RgbImage,
  x: number,
  y: number,
  wx: Float64Array,
  wy: Float64Array,
  out: Float32Array | Uint8Array,
  o: number,
): void {
  const { width: w, height: h, data } = img;
  const ix = Math.floor(x);
  const iy = Math.floor(y);
  cubicWeights(x - ix, wx);
  cubicWeights(y - iy, wy);
  let r = 0;
  let g = 0;
  let b = 0;
  for (let j = 0; j < 4; j++) {
    const row = Math.min(h - 1, Math.max(0, iy - 1 + j)) * w;
    for (let i = 0; i < 4; i++) {
      const k = wx[i]! * wy[j]!;
      const q = (row + Math.min(w - 1, Math.max(0, ix - 1 + i))) * 3;
      r += data[q]! * k;
      g += data[q + 1]! * k;
      b += data[q + 2]! * k;
    }
  }
  out[o] = r;
  out[o + 1] = g;
  out[o + 2] = b;
}

/** Bilinear sample of `img` at index-space (x, y), inside [0, width-1] x [0, height-1], into out[o..o+2]. */
function sampleBilinear(img: RgbImage, x: number, y: number, out: Float32Array, o: number): void {
  const { width: w, data } = img;
  const ix = Math.min(w - 2, Math.floor(x));
  const iy = Math.min(img.height - 2, Math.floor(y));
  const fx = x - ix;
  const fy = y - iy;
  const i00 = (iy * w + ix) * 3;
  const i10 = i00 + w * 3;
  for (let c = 0; c < 3; c++) {
    const top = data[i00 + c]! * (1 - fx) + data[i00 + 3 + c]! * fx;
    const bottom = data[i10 + c]! * (1 - fx) + data[i10 + 3 + c]! * fx;
    out[o + c] = top * (1 - fy) + bottom * fy;
  }
}

/**
 * Warps `src` so that `srcPts` land on `dstPts`, rendering only the part inside `region` of the
 * destination. Pixel centres are at integer + 0.5 in both images, as for the landmark coordinates.
 */
export function warpPiecewiseAffine(
  src: RgbImage,
  srcPts: readonly Point[],
  dstPts: readonly Point[],
  triangles: Uint32Array,
  region: Region,
  kernel: 'bilinear' | 'bicubic' = 'bilinear',
): WarpResult {
  const wx = new Float64Array(4);
  const wy = new Float64Array(4);
  const { width: rw, height: rh } = region;
  const rgb = floats(rw * rh * 3);
  const covered = bytes(rw * rh);
  const sw = src.width;
  const sh = src.height;
  const EPS = 1e-7; // include shared edges on both sides: no cracks between triangles

  for (let t = 0; t < triangles.length; t += 3) {
    const d0 = dstPts[triangles[t]!]!;
    const d1 = dstPts[triangles[t + 1]!]!;
    const d2 = dstPts[triangles[t + 2]!]!;
    const s0 = srcPts[triangles[t]!]!;
    const s1 = srcPts[triangles[t + 1]!]!;
    const s2 = srcPts[triangles[t + 2]!]!;
    const det = (d1.y - d2.y) * (d0.x - d2.x) + (d2.x - d1.x) * (d0.y - d2.y);
    if (Math.abs(det) < 1e-9) continue; // degenerate triangle: its neighbours cover its (zero) area
    const inv = 1 / det;

    const x0 = Math.max(region.left, Math.floor(Math.min(d0.x, d1.x, d2.x) - 0.5));
    const x1 = Math.min(region.left + rw - 1, Math.ceil(Math.max(d0.x, d1.x, d2.x) - 0.5));
    const y0 = Math.max(region.top, Math.floor(Math.min(d0.y, d1.y, d2.y) - 0.5));
    const y1 = Math.min(region.top + rh - 1, Math.ceil(Math.max(d0.y, d1.y, d2.y) - 0.5));

    for (let y = y0; y <= y1; y++) {
      const py = y + 0.5;
      for (let x = x0; x <= x1; x++) {
        const px = x + 0.5;
        // Barycentric coordinates of the pixel centre in the destination triangle.
        const l0 = ((d1.y - d2.y) * (px - d2.x) + (d2.x - d1.x) * (py - d2.y)) * inv;
        const l1 = ((d2.y - d0.y) * (px - d2.x) + (d0.x - d2.x) * (py - d2.y)) * inv;
        const l2 = 1 - l0 - l1;
        if (l0 < -EPS || l1 < -EPS || l2 < -EPS) continue;
        // Same weights in the source triangle give the sample position (index space: centre - 0.5).
        let sx = l0 * s0.x + l1 * s1.x + l2 * s2.x - 0.5;
        let sy = l0 * s0.y + l1 * s1.y + l2 * s2.y - 0.5;
        sx = sx < 0 ? 0 : sx > sw - 1 ? sw - 1 : sx;
        sy = sy < 0 ? 0 : sy > sh - 1 ? sh - 1 : sy;
        const o = ((y - region.top) * rw + (x - region.left)) * 3;
        if (kernel === 'bicubic') {
          sampleBicubic(src, sx, sy, wx, wy, rgb, o);
          for (let c = 0; c < 3; c++) rgb[o + c] = Math.min(255, Math.max(0, rgb[o + c]!));
        } else {
          sampleBilinear(src, sx, sy, rgb, o);
        }
        covered[o / 3] = 1;
      }
    }
  }
  return { rgb, covered };
}
