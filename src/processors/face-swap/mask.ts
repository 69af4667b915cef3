/**
 * The blend mask. A hard polygon edge would show as a seam, and the hull's own edge sits exactly on
 * the face contour (where background and hair begin), so the mask is pulled inside the hull
 * ("eroded") and then ramps up smoothly ("feathered"). Both come from one Euclidean distance
 * transform: distance to the nearest pixel outside the hull.
 */
import { INSIDE, KNOWN, solveMembrane } from './blend.js';
import type { Region } from './geometry.js';
import type { Point } from './types.js';
import { bytes, copyOf, doubles, floats, ints } from './scratch.js';

/**
 * Sets `out[i] = value` for the pixels (centres) inside the convex polygon; `out` is region-sized.
 * Only the polygon's own rows and spans are visited.
 */
export function fillPolygon(out: Uint8Array, poly: readonly Point[], region: Region, value: number): void {
  const w = region.width;
  const n = poly.length;
  if (n < 3) return;
  const { y0, y1 } = polygonRows(poly, region);
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

/** The rows y0..y1 of the region (clipped to it; none when y1 < y0) that fillPolygon may fill for `poly`. */
export function polygonRows(poly: readonly Point[], region: Region): { y0: number; y1: number } {
  let ymin = Infinity;
  let ymax = -Infinity;
  for (const p of poly) {
    ymin = Math.min(ymin, p.y);
    ymax = Math.max(ymax, p.y);
  }
  return {
    y0: Math.max(0, Math.floor(ymin - region.top - 0.5)),
    y1: Math.min(region.height - 1, Math.ceil(ymax - region.top - 0.5)),
  };
}

/** 1 for pixels (centres) inside the convex polygon, region-sized. */
export function rasterizePolygon(poly: readonly Point[], region: Region): Uint8Array {
  const out = bytes(region.width * region.height);
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
 * The first pass of distanceInside, down the columns of a grid of 0 (outside) and FAR: each cell's
 * squared distance to the nearest 0 in its column, FAR when there is none. What edt1d gives on
 * such a column (a parabola at a 0 is below every FAR one), found by two row-order sweeps instead of
 * a copy of each column.
 */
function columnDistances(grid: Float64Array, pw: number, ph: number): void {
  const last = new Int32Array(pw).fill(-1);
  for (let y = 0; y < ph; y++) {
    for (let x = 0, i = y * pw; x < pw; x++, i++) {
      if (grid[i] === 0) last[x] = y;
      else if (last[x]! >= 0) grid[i] = (y - last[x]!) ** 2;
    }
  }
  last.fill(-1);
  for (let y = ph - 1; y >= 0; y--) {
    for (let x = 0, i = y * pw; x < pw; x++, i++) {
      const g = grid[i]!;
      if (g === 0) last[x] = y;
      else if (last[x]! >= 0 && (last[x]! - y) ** 2 < g) grid[i] = (last[x]! - y) ** 2;
    }
  }
}

/** A rectangle of a w×h plane (columns left..left+width, rows top..top+height). */
export interface Window {
  left: number;
  top: number;
  width: number;
  height: number;
}

/**
 * Euclidean distance (pixels) from each pixel to the nearest pixel where `inside` is 0; pixels beyond
 * the region's border count as outside, so the distance also stops at the region's edge.
 *
 * With `win`, only over that window (the result is win.width × win.height): pixels beyond it but in
 * the region are not looked at, so a distance is exact where it is at most the window's reach past
 * the pixel (the nearest outside pixel lies in the window), and never less than the true one.
 */
export function distanceInside(
  inside: Uint8Array,
  w: number,
  h: number,
  win: Window = { left: 0, top: 0, width: w, height: h },
): Float32Array {
  // Pad by one pixel on every side: "outside" beyond the region's border, unknown (FAR) beyond the
  // window's edge inside the region.
  const { left, top, width: ww, height: wh } = win;
  const pw = ww + 2;
  const ph = wh + 2;
  const grid = doubles(pw * ph);
  for (let y = 0; y < ph; y++) {
    const gy = top + y - 1;
    for (let x = 0; x < pw; x++) {
      const gx = left + x - 1;
      if (gx < 0 || gy < 0 || gx >= w || gy >= h) continue;
      const inWin = x > 0 && y > 0 && x <= ww && y <= wh;
      grid[y * pw + x] = !inWin || inside[gy * w + gx] === 1 ? FAR : 0;
    }
  }
  columnDistances(grid, pw, ph);
  const d = new Float64Array(pw);
  const v = new Int32Array(pw);
  const z = new Float64Array(pw + 1);
  for (let y = 0; y < ph; y++) {
    const row = grid.subarray(y * pw, (y + 1) * pw);
    edt1d(row, pw, d, v, z);
    row.set(d);
  }
  const out = floats(ww * wh);
  for (let y = 0; y < wh; y++) {
    for (let x = 0; x < ww; x++) out[y * ww + x] = Math.sqrt(grid[(y + 1) * pw + x + 1]!);
  }
  return out;
}

/**
 * Alpha from the distance map: 0 up to `erode` pixels inside the edge, then a smoothstep ramp to 1
 * over `feather` pixels.
 */
export function featherAlpha(dist: Float32Array, erode: number, feather: number): Float32Array {
  const out = floats(dist.length);
  for (let i = 0; i < dist.length; i++) {
    const t = (dist[i]! - erode) / feather;
    out[i] = t <= 0 ? 0 : t >= 1 ? 1 : t * t * (3 - 2 * t);
  }
  return out;
}

/** 0..1 weight from a mask (non-zero = 1): two box blurs of radius `r`, for a soft change over ~2r. */
export function featherMask(mask: Uint8Array, w: number, h: number, r: number): Float32Array {
  // A loop, not Float32Array.from(mask, fn): that goes through the iterator, two objects per pixel.
  let a = floats(mask.length);
  for (let i = 0; i < mask.length; i++) a[i] = mask[i] ? 1 : 0;
  for (let pass = 0; pass < 2; pass++) {
    const b = floats(a.length);
    for (let y = 0; y < h; y++) {
      let acc = 0;
      for (let x = -r; x < w; x++) {
        if (x + r < w) acc += a[y * w + x + r]!;
        if (x - r - 1 >= 0) acc -= a[y * w + x - r - 1]!;
        if (x >= 0) b[y * w + x] = acc / (2 * r + 1);
      }
    }
    const c = floats(a.length);
    for (let x = 0; x < w; x++) {
      let acc = 0;
      for (let y = -r; y < h; y++) {
        if (y + r < h) acc += b[(y + r) * w + x]!;
        if (y - r - 1 >= 0) acc -= b[(y - r - 1) * w + x]!;
        if (y >= 0) c[y * w + x] = acc / (2 * r + 1);
      }
    }
    a = c;
  }
  return a;
}

/** The mask grown by one pixel (4-neighbourhood). */
export function dilate(mask: Uint8Array, w: number, h: number): Uint8Array {
  const out = copyOf(mask);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const i = y * w + x;
      if (mask[i]) continue;
      if (
        (x > 0 && mask[i - 1]) ||
        (x < w - 1 && mask[i + 1]) ||
        (y > 0 && mask[i - w]) ||
        (y < h - 1 && mask[i + w])
      ) {
        out[i] = 1;
      }
    }
  }
  return out;
}

/**
 * Fills (in place) the pixels where `hole` is set from the `known` pixels around them: the
 * harmonic interpolation (Laplace's equation, as the blend's membrane) of the known pixels right at
 * the hole's edge, so a lock of hair along a shaded temple takes that shade and not the mean of
 * the brighter skin further in (a flat, paler band: a grey streak on a target lit from one side).
 * A box mean (boxFill) first, which stays where no known pixel borders the hole.
 */
export function fillFromSurroundings(
  lab: Float32Array,
  hole: Uint8Array,
  known: Uint8Array,
  w: number,
  h: number,
): void {
  boxFill(lab, hole, known, w, h);
  const n = w * h;
  const state = bytes(n);
  const val = floats(n * 3);
  let edge = 0;
  for (let i = 0; i < n; i++) {
    if (hole[i]) {
      state[i] = INSIDE;
    } else if (known[i]) {
      const x = i % w;
      const next =
        (x > 0 && hole[i - 1]) || (x < w - 1 && hole[i + 1]) || (i >= w && hole[i - w]) || (i < n - w && hole[i + w]);
      if (!next) continue;
      state[i] = KNOWN;
      edge++;
    } else continue;
    for (let c = 0; c < 3; c++) val[i * 3 + c] = lab[i * 3 + c]!;
  }
  // Every edge pixel counts: robust rejection over the whole edge (the blend ring's dropOutliers)
  // took a lit cheek's edge for an outlier against a long shaded lock's and filled it dark.
  if (edge === 0) return;
  solveMembrane(state, val, w, h);
  for (let i = 0; i < n; i++) if (hole[i]) for (let c = 0; c < 3; c++) lab[i * 3 + c] = val[i * 3 + c]!;
}

/** Known pixels a fill's box needs at most (fewer while the box is small). */
const MIN_KNOWN = 64;

/**
 * Fills (in place) the pixels where `hole` is set with the mean of the `known` pixels (not in the
 * hole) in the smallest box around each that holds enough of them (a quarter of the box, or MIN_KNOWN: two
 * stray pixels of hair next to a lock filled it black): the colour of the skin right around the
 * hole, with no texture of its own. One summed-area table; each pass only visits the pixels still
 * unfilled, with a box twice as large.
 */
function boxFill(lab: Float32Array, hole: Uint8Array, known: Uint8Array, w: number, h: number): void {
  const W = w + 1;
  const sat = doubles(W * (h + 1) * 4);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const i = y * w + x;
      const k = known[i] && !hole[i] ? 1 : 0;
      const o = ((y + 1) * W + x + 1) * 4;
      const up = (y * W + x + 1) * 4;
      const left = ((y + 1) * W + x) * 4;
      const diag = (y * W + x) * 4;
      for (let c = 0; c < 4; c++) {
        const v = c < 3 ? k * lab[i * 3 + c]! : k;
        sat[o + c] = v + sat[up + c]! + sat[left + c]! - sat[diag + c]!;
      }
    }
  }
  let count = 0;
  for (let i = 0; i < w * h; i++) if (hole[i]) count++;
  let todo = ints(count);
  for (let i = 0, k = 0; i < w * h; i++) if (hole[i]) todo[k++] = i;
  for (let r = 2; todo.length > 0 && r < 2 * Math.max(w, h); r *= 2) {
    // Still unfilled pixels move to the front of `todo` (no closures or arrays per pixel).
    let left = 0;
    for (let k = 0; k < todo.length; k++) {
      const i = todo[k]!;
      const x = i % w;
      const y = (i - x) / w;
      const a = (Math.min(h, y + r + 1) * W + Math.min(w, x + r + 1)) * 4; // bottom right
      const b = (Math.min(h, y + r + 1) * W + Math.max(0, x - r)) * 4; // bottom left
      const c = (Math.max(0, y - r) * W + Math.min(w, x + r + 1)) * 4; // top right
      const d = (Math.max(0, y - r) * W + Math.max(0, x - r)) * 4; // top left
      const n = sat[a + 3]! - sat[b + 3]! - sat[c + 3]! + sat[d + 3]!;
      // Enough known pixels for a mean that is not a few stray pixels' colour.
      if (n < Math.min(r * r, MIN_KNOWN)) {
        todo[left++] = i;
        continue;
      }
      for (let ch = 0; ch < 3; ch++) lab[i * 3 + ch] = (sat[a + ch]! - sat[b + ch]! - sat[c + ch]! + sat[d + ch]!) / n;
    }
    todo = todo.subarray(0, left);
  }
}

/**
 * Grows the `n` pixels already in `queue` through `mask` (8-connected): every `mask` pixel not yet
 * `seen` that touches one is marked in `seen` and appended. Returns the queue's new length (the
 * pixels reached follow the seeds there, for a caller that measures the component).
 */
export function flood8(mask: Uint8Array, seen: Uint8Array, queue: Int32Array, n: number, w: number, h: number): number {
  for (let q = 0; q < n; q++) {
    const i = queue[q]!;
    const x = i % w;
    const y = (i - x) / w;
    for (let dy = -1; dy <= 1; dy++) {
      for (let dx = -1; dx <= 1; dx++) {
        const xx = x + dx;
        const yy = y + dy;
        const j = yy * w + xx;
        if (xx < 0 || yy < 0 || xx >= w || yy >= h || !mask[j] || seen[j]) continue;
        seen[j] = 1;
        queue[n++] = j;
      }
    }
  }
  return n;
}
