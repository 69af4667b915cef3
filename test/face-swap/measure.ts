/** Measurements of swap results for the tests (and bench/face-swap-look.ts): paint remnants, sharpness. */
import { rgbToLab } from '../../src/processors/face-swap/color.js';
import { rasterizePolygon } from '../../src/processors/face-swap/mask.js';
import type { Point, RgbImage } from '../../src/processors/face-swap/types.js';

/** The landmarks' bounding box shrunk by `kx`, `ky` of its size on each side (the face's interior). */
export function interior(lm: readonly Point[], kx: number, kyTop: number, kyBottom = kyTop) {
  const xs = lm.map((p) => p.x);
  const ys = lm.map((p) => p.y);
  const x0 = Math.min(...xs);
  const x1 = Math.max(...xs);
  const y0 = Math.min(...ys);
  const y1 = Math.max(...ys);
  return {
    x0: Math.round(x0 + kx * (x1 - x0)),
    x1: Math.round(x1 - kx * (x1 - x0)),
    y0: Math.round(y0 + kyTop * (y1 - y0)),
    y1: Math.round(y1 - kyBottom * (y1 - y0)),
  };
}

function labAt(img: RgbImage, x: number, y: number): Float32Array {
  const o = (y * img.width + x) * 3;
  return rgbToLab(Float32Array.of(img.data[o]!, img.data[o + 1]!, img.data[o + 2]!));
}

/**
 * Pixels of the face (jaw to brows, inside the jaw line's width) whose chroma has moved at least
 * `k` of the way from the face's mean skin chroma towards `paint`'s: a remnant of that paint.
 */
export function paintRemnants(img: RgbImage, lm: readonly Point[], paint: readonly number[], k = 0.2): number {
  const r = interior(lm, 0.08, 0, 0.04);
  const P = rgbToLab(Float32Array.of(paint[0]!, paint[1]!, paint[2]!));
  const ab: number[] = [];
  let ma = 0;
  let mb = 0;
  for (let y = r.y0; y < r.y1; y++) {
    for (let x = r.x0; x < r.x1; x++) {
      const L = labAt(img, x, y);
      ab.push(L[1]!, L[2]!);
      ma += L[1]!;
      mb += L[2]!;
    }
  }
  const n = ab.length / 2;
  ma /= n;
  mb /= n;
  const da = P[1]! - ma;
  const db = P[2]! - mb;
  const d2 = da * da + db * db;
  let count = 0;
  for (let i = 0; i < n; i++) if (((ab[2 * i]! - ma) * da + (ab[2 * i + 1]! - mb) * db) / d2 > k) count++;
  return count;
}

/** Variance of the 4-neighbour Laplacian of luma over the face's inner part (eyes, nose, mouth, cheeks). */
export function laplacianVariance(img: RgbImage, lm: readonly Point[]): number {
  const r = interior(lm, 0.2, 0.15, 0.2);
  const g = (x: number, y: number) => {
    const o = (y * img.width + x) * 3;
    return 0.299 * img.data[o]! + 0.587 * img.data[o + 1]! + 0.114 * img.data[o + 2]!;
  };
  let s = 0;
  let s2 = 0;
  let n = 0;
  for (let y = r.y0; y < r.y1; y++) {
    for (let x = r.x0; x < r.x1; x++) {
      const l = 4 * g(x, y) - g(x - 1, y) - g(x + 1, y) - g(x, y - 1) - g(x, y + 1);
      s += l;
      s2 += l * l;
      n++;
    }
  }
  return s2 / n - (s / n) ** 2;
}

/** Hue angle (degrees, CIELAB a/b) of the mean colour of the upper and of the lower lip. */
export function lipHues(img: RgbImage, lm: readonly Point[]): { upper: number; lower: number } {
  const hue = (outline: number[]) => {
    const poly = outline.map((i) => lm[i]!);
    const region = { left: 0, top: 0, width: img.width, height: img.height };
    const inside = rasterizePolygon(poly, region);
    let a = 0;
    let b = 0;
    for (let i = 0; i < inside.length; i++) {
      if (!inside[i]) continue;
      const L = labAt(img, i % img.width, Math.floor(i / img.width));
      a += L[1]!;
      b += L[2]!;
    }
    return (Math.atan2(b, a) * 180) / Math.PI;
  };
  return {
    upper: hue([48, 49, 50, 51, 52, 53, 54, 64, 63, 62, 61, 60]),
    lower: hue([54, 55, 56, 57, 58, 59, 48, 60, 67, 66, 65, 64]),
  };
}

/** How much darker (CIELAB L) a spot of radius `r` at `c` is than the ring from 2r to 3r around it. */
export function spotDarkness(img: RgbImage, c: Point, r: number): number {
  let disc = 0;
  let nd = 0;
  let ring = 0;
  let nr = 0;
  for (let y = Math.floor(c.y - 3 * r); y <= c.y + 3 * r; y++) {
    for (let x = Math.floor(c.x - 3 * r); x <= c.x + 3 * r; x++) {
      const d = Math.hypot(x - c.x, y - c.y);
      const L = labAt(img, x, y)[0]!;
      if (d <= r) {
        disc += L;
        nd++;
      } else if (d >= 2 * r && d <= 3 * r) {
        ring += L;
        nr++;
      }
    }
  }
  return ring / nr - disc / nd;
}

/** Mean CIELAB colour of the disc of radius r at c. */
export function discLab(img: RgbImage, c: Point, r: number): [number, number, number] {
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
