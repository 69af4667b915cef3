/**
 * Detail matching: the warped source face should be as crisp as the photo it goes into. A source
 * face smaller or softer than the target face (upsampled by the warp, or simply a softer photo)
 * would otherwise show as a soft patch at 100 %. Sharpness is measured as the variance of the
 * Laplacian of luma over the face, and the warped face gets an unsharp mask just strong enough to
 * reach the target's (never softened, and capped so noise is not blown up).
 */
import { bytes, floats } from './scratch.js';

/** Variance of the 4-neighbour Laplacian of luma over the pixels where `mask` is set (interleaved RGB, floats or bytes). */
export function laplacianVariance(
  rgb: ArrayLike<number>,
  w: number,
  h: number,
  mask: Uint8Array,
  stride = w,
  offset = 0,
): number {
  // Luma of the rows in use, once (no per-pixel closures: this runs over the whole face).
  const luma = floats(w * h);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const i = (offset + y * stride + x) * 3;
      luma[y * w + x] = 0.299 * rgb[i]! + 0.587 * rgb[i + 1]! + 0.114 * rgb[i + 2]!;
    }
  }
  let s = 0;
  let s2 = 0;
  let n = 0;
  for (let y = 1; y < h - 1; y++) {
    for (let x = 1; x < w - 1; x++) {
      const m = y * w + x;
      if (!mask[m] || !mask[m - 1] || !mask[m + 1] || !mask[m - w] || !mask[m + w]) continue;
      const l = 4 * luma[m]! - luma[m - 1]! - luma[m + 1]! - luma[m - w]! - luma[m + w]!;
      s += l;
      s2 += l * l;
      n++;
    }
  }
  return n > 0 ? s2 / n - (s / n) ** 2 : 0;
}

/** Most unsharp-mask gain applied (the high frequencies at most 1 + MAX_GAIN times as strong). */
const MAX_GAIN = 3;

/**
 * Unsharp mask of `rgb` (in place, where `use` and its whole 3x3 neighbourhood are set):
 * x + k (x − blur(x)) with a 3x3 binomial blur, k chosen so the Laplacian variance of luma over
 * `core` becomes `want`. The Laplacian is linear, so with L0 = Lap(luma) and Lh = Lap(luma − blur)
 * the variance after is var(L0) + 2k cov(L0, Lh) + k² var(Lh): k is solved for exactly (an
 * upsampled face has little energy at the finest scale, so no rule of thumb fits it). Never
 * softens; k at most MAX_GAIN, so noise is not blown up. Returns k.
 */
export function matchDetail(
  rgb: Float32Array,
  w: number,
  h: number,
  use: Uint8Array,
  core: Uint8Array,
  want: number,
): number {
  const n = w * h;
  const luma = floats(n);
  for (let i = 0, o = 0; i < n; i++, o += 3) luma[i] = 0.299 * rgb[o]! + 0.587 * rgb[o + 1]! + 0.114 * rgb[o + 2]!;
  // Where the mask applies: the whole 3x3 neighbourhood is face (next to uncovered, zero pixels
  // the blur would draw a dark-and-bright ring along the outline).
  const ok = bytes(n);
  const hp = floats(n);
  for (let y = 1; y < h - 1; y++) {
    for (let x = 1; x < w - 1; x++) {
      const i = y * w + x;
      if (!use[i] || !use[i - 1] || !use[i + 1] || !use[i - w] || !use[i + w]) continue;
      if (!use[i - w - 1] || !use[i - w + 1] || !use[i + w - 1] || !use[i + w + 1]) continue;
      ok[i] = 1;
      hp[i] = luma[i]! - blur3(luma, i, w);
    }
  }
  let n0 = 0;
  let s0 = 0;
  let sh = 0;
  let s00 = 0;
  let s0h = 0;
  let shh = 0;
  for (let y = 1; y < h - 1; y++) {
    for (let x = 1; x < w - 1; x++) {
      const m = y * w + x;
      if (!core[m] || !core[m - 1] || !core[m + 1] || !core[m - w] || !core[m + w]) continue;
      const l0 = 4 * luma[m]! - luma[m - 1]! - luma[m + 1]! - luma[m - w]! - luma[m + w]!;
      const lh = 4 * hp[m]! - hp[m - 1]! - hp[m + 1]! - hp[m - w]! - hp[m + w]!;
      n0++;
      s0 += l0;
      sh += lh;
      s00 += l0 * l0;
      s0h += l0 * lh;
      shh += lh * lh;
    }
  }
  if (n0 === 0) return 0;
  const v0 = s00 / n0 - (s0 / n0) ** 2;
  const c = s0h / n0 - (s0 / n0) * (sh / n0);
  const vh = shh / n0 - (sh / n0) ** 2;
  if (want <= v0 || vh <= 0) return 0;
  // Smallest k >= 0 with v0 + 2ck + vh k² = want (the quadratic grows for k >= 0 since c >= 0 in practice).
  const k = Math.min(MAX_GAIN, (-c + Math.sqrt(Math.max(0, c * c + vh * (want - v0)))) / vh);
  if (k <= 0.02) return 0;
  // The same high-pass of luma added to all three channels: luma (weights summing to 1) gets
  // exactly k·hp, and colour edges get no fringes.
  for (let i = 0; i < n; i++) {
    if (!ok[i]) continue;
    const d = k * hp[i]!;
    const o = i * 3;
    const r = rgb[o]! + d;
    const g = rgb[o + 1]! + d;
    const b = rgb[o + 2]! + d;
    rgb[o] = r < 0 ? 0 : r > 255 ? 255 : r;
    rgb[o + 1] = g < 0 ? 0 : g > 255 ? 255 : g;
    rgb[o + 2] = b < 0 ? 0 : b > 255 ? 255 : b;
  }
  return k;
}

/** 3x3 binomial blur of plane `a` (row length `w`) at index `i`. */
function blur3(a: Float32Array, i: number, w: number): number {
  const up = i - w;
  const down = i + w;
  return (
    (4 * a[i]! +
      2 * (a[i - 1]! + a[i + 1]! + a[up]! + a[down]!) +
      a[up - 1]! +
      a[up + 1]! +
      a[down - 1]! +
      a[down + 1]!) /
    16
  );
}
