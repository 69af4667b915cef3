/**
 * The blend mask. A hard polygon edge would show as a seam, and the hull's own edge sits exactly on
 * the face contour (where background and hair begin), so the mask is pulled inside the hull
 * ("eroded") and then ramps up smoothly ("feathered"). Both come from one Euclidean distance
 * transform: distance to the nearest pixel outside the hull.
 */
import type { Region } from './geometry.js';
import type { Point } from './types.js';

/**
 * Sets `out[i] = value` for the pixels (centres) inside the convex polygon; `out` is region-sized.
 * Only the polygon's own rows and spans are visited.
 */
export function fillPolygon(out: Uint8Array, poly: readonly Point[], region: Region, value: number): void {
  const { width: w, height: h } = region;
  const n = poly.length;
  if (n < 3) return;
  let ymin = Infinity;
  let ymax = -Infinity;
  for (const p of poly) {
    ymin = Math.min(ymin, p.y);
    ymax = Math.max(ymax, p.y);
  }
  const y0 = Math.max(0, Math.floor(ymin - region.top - 0.5));
  const y1 = Math.min(h - 1, Math.ceil(ymax - region.top - 0.5));
  for (let y = y0; y <= y1; y++) {
    const py = region.top + y + 0.5;
    let xmin = Infinity;
    let xmax = -Infinity;
    for (let i = 0; i < n; i++) {
      const a = poly[i]!;
      const b = poly[(i + 1) % n]!;
      if ((a.y <= py && b.y > py) || (b.y <= py && a.y > py)) {
        const x = a.x + ((py - a.y) / (b.y - a.y)) * (b.x - a.x);
        if (x < xmin) xmin = x;
        if (x > xmax) xmax = x;
      }
    }
    if (xmin > xmax) continue;
    // Pixel x is inside when its centre x + 0.5 lies within [xmin, xmax].
    const from = Math.max(0, Math.ceil(xmin - region.left - 0.5));
    const to = Math.min(w - 1, Math.floor(xmax - region.left - 0.5));
    if (to >= from) out.fill(value, y * w + from, y * w + to + 1);
  }
}

/** 1 for pixels (centres) inside the convex polygon, region-sized. */
export function rasterizePolygon(poly: readonly Point[], region: Region): Uint8Array {
  const out = new Uint8Array(region.width * region.height);
  fillPolygon(out, poly, region, 1);
  return out;
}

const FAR = 1e20; // "infinitely far" but finite, so the parabola intersections stay well defined

/** 1-D squared distance transform of f (Felzenszwalb & Huttenlocher 2012), using scratch arrays. */
function edt1d(f: Float64Array, n: number, d: Float64Array, v: Int32Array, z: Float64Array): void {
  let k = 0;
  v[0] = 0;
  z[0] = -FAR;
  z[1] = FAR;
  for (let q = 1; q < n; q++) {
    let vk = v[k]!;
    let s = (f[q]! + q * q - (f[vk]! + vk * vk)) / (2 * q - 2 * vk);
    while (s <= z[k]!) {
      k--;
      vk = v[k]!;
      s = (f[q]! + q * q - (f[vk]! + vk * vk)) / (2 * q - 2 * vk);
    }
    k++;
    v[k] = q;
    z[k] = s;
    z[k + 1] = FAR;
  }
  k = 0;
  for (let q = 0; q < n; q++) {
    while (z[k + 1]! < q) k++;
    const vk = v[k]!;
    d[q] = (q - vk) * (q - vk) + f[vk]!;
  }
}

/**
 * Euclidean distance (pixels) from each pixel to the nearest pixel where `inside` is 0; pixels beyond
 * the region's border count as outside, so the distance also stops at the region's edge.
 */
export function distanceInside(inside: Uint8Array, w: number, h: number): Float32Array {
  // Pad by one pixel of "outside" on every side.
  const pw = w + 2;
  const ph = h + 2;
  const grid = new Float64Array(pw * ph);
  for (let y = 0; y < ph; y++) {
    for (let x = 0; x < pw; x++) {
      const ix = x - 1;
      const iy = y - 1;
      const isIn = ix >= 0 && iy >= 0 && ix < w && iy < h && inside[iy * w + ix] === 1;
      grid[y * pw + x] = isIn ? FAR : 0;
    }
  }
  const n = Math.max(pw, ph);
  const f = new Float64Array(n);
  const d = new Float64Array(n);
  const v = new Int32Array(n);
  const z = new Float64Array(n + 1);
  for (let x = 0; x < pw; x++) {
    for (let y = 0; y < ph; y++) f[y] = grid[y * pw + x]!;
    edt1d(f, ph, d, v, z);
    for (let y = 0; y < ph; y++) grid[y * pw + x] = d[y]!;
  }
  for (let y = 0; y < ph; y++) {
    for (let x = 0; x < pw; x++) f[x] = grid[y * pw + x]!;
    edt1d(f, pw, d, v, z);
    for (let x = 0; x < pw; x++) grid[y * pw + x] = d[x]!;
  }
  const out = new Float32Array(w * h);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) out[y * w + x] = Math.sqrt(grid[(y + 1) * pw + x + 1]!);
  }
  return out;
}

/**
 * Alpha from the distance map: 0 up to `erode` pixels inside the edge, then a smoothstep ramp to 1
 * over `feather` pixels.
 */
export function featherAlpha(dist: Float32Array, erode: number, feather: number): Float32Array {
  const out = new Float32Array(dist.length);
  for (let i = 0; i < dist.length; i++) {
    const t = (dist[i]! - erode) / feather;
    out[i] = t <= 0 ? 0 : t >= 1 ? 1 : t * t * (3 - 2 * t);
  }
  return out;
}
