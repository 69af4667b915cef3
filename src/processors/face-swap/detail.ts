/**
 * Detail matching: the warped source face should be as crisp as the photo it goes into. A source
 * face smaller or softer than the target face (upsampled by the warp, or simply a softer photo)
 * would otherwise show as a soft patch at 100 %. Sharpness is measured as the variance of the
 * Laplacian of luma over the face, and the warped face gets an unsharp mask just strong enough to
 * reach the target's (never softened, and capped so noise is not blown up).
 */

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
  const luma = new Float32Array(w * h);
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
const MAX_GAIN = 2;

/**
 * Unsharp mask of `rgb` (in place, where `use` is set): x + k (x − blur(x)) with a 3x3 binomial blur,
 * k chosen so the Laplacian variance over `mask` rises from `have` to about `want`. Returns k.
 */
export function matchDetail(
  rgb: Float32Array,
  w: number,
  h: number,
  use: Uint8Array,
  have: number,
  want: number,
): number {
  if (have <= 0 || want <= have) return 0;
  // The Laplacian's response to x + k (x − blur x) is roughly (1 + k) times its response to x at the
  // high frequencies it sees, so variance scales by about (1 + k)².
  const k = Math.min(MAX_GAIN, Math.sqrt(want / have) - 1);
  if (k <= 0.02) return 0;
  const src = Float32Array.from(rgb);
  for (let y = 1; y < h - 1; y++) {
    for (let x = 1; x < w - 1; x++) {
      const i = y * w + x;
      // Only where the whole 3x3 neighbourhood is face: next to uncovered (zero) pixels the blur would
      // draw a dark-and-bright ring along the outline.
      if (!use[i] || !use[i - 1] || !use[i + 1] || !use[i - w] || !use[i + w]) continue;
      if (!use[i - w - 1] || !use[i - w + 1] || !use[i + w - 1] || !use[i + w + 1]) continue;
      for (let c = 0; c < 3; c++) {
        const o = i * 3 + c;
        const up = o - w * 3;
        const down = o + w * 3;
        const blur =
          (4 * src[o]! +
            2 * (src[o - 3]! + src[o + 3]! + src[up]! + src[down]!) +
            src[up - 3]! +
            src[up + 3]! +
            src[down - 3]! +
            src[down + 3]!) /
          16;
        const v = src[o]! + k * (src[o]! - blur);
        rgb[o] = v < 0 ? 0 : v > 255 ? 255 : v;
      }
    }
  }
  return k;
}
