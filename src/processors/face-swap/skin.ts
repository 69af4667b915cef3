/**
 * What in the face region is skin, and how the target's light differs from the source's (which
 * non-skin is an occluder: occlusion.ts). All in CIELAB, all on CPU:
 *
 * - A skin-colour model per face (robust mean and covariance of a/b, plus a lenient lightness band),
 *   fitted on the face's cheeks, forehead and chin (eyes, brows and mouth left out).
 * - Occlusion's soft edge (softenMask).
 * - Lighting: a low-order polynomial surface fitted (robustly) to target − source over skin. It
 *   follows a side light or a colour cast across the face, and cannot reproduce the shape of the
 *   target's lips, lids or brows, so none of them is carried into the new face.
 */

import { dilate, featherMask } from './mask.js';
import { medianAndSpread, medianInPlace } from './select.js';
import { bytes, floats, ints } from './scratch.js';

export interface SkinModel {
  /** Mean of a and b. */
  a: number;
  b: number;
  /** Inverse covariance of (a, b). */
  iaa: number;
  iab: number;
  ibb: number;
  /** Lightness mean and spread. */
  l: number;
  lStd: number;
}

/** Pixels the robust median and spread are taken from (evenly spread over the sample). */
const MEDIAN_SAMPLES = 8000;
/** Smallest a/b spread assumed (JPEG noise and a very even skin would otherwise make everything "non-skin"). */
const MIN_AB_STD = 2.5;
const MIN_L_STD = 6;

/**
 * Robust skin model from the Lab pixels where `sample` is non-zero: median/MAD first, then mean and
 * covariance over the pixels within 3 robust spreads (so a bar or hair over part of the sample does
 * not shift it). Undefined when there are too few pixels.
 */
export function fitSkinModel(lab: Float32Array, sample: Uint8Array): SkinModel | undefined {
  let count = 0;
  for (let i = 0; i < sample.length; i++) if (sample[i]) count++;
  if (count < 50) return undefined;
  const idx = ints(count);
  for (let i = 0, k = 0; i < sample.length; i++) if (sample[i]) idx[k++] = i;
  // Medians from at most MEDIAN_SAMPLES evenly spread pixels: plenty for a robust centre and spread.
  const step = Math.max(1, Math.ceil(count / MEDIAN_SAMPLES));
  const v = new Float32Array(Math.ceil(count / step));
  const med = (c: number) => {
    for (let k = 0, j = 0; k < count; k += step, j++) v[j] = lab[idx[k]! * 3 + c]!;
    return medianAndSpread(v);
  };
  const L = med(0);
  const A = med(1);
  const B = med(2);
  const sl = Math.max(L.s, MIN_L_STD);
  const sa = Math.max(A.s, MIN_AB_STD);
  const sb = Math.max(B.s, MIN_AB_STD);
  let n = 0;
  let ml = 0;
  let ma = 0;
  let mb = 0;
  let sll = 0;
  let saa = 0;
  let sbb = 0;
  let sab = 0;
  for (const i of idx) {
    const l = lab[i * 3]!;
    const a = lab[i * 3 + 1]!;
    const b = lab[i * 3 + 2]!;
    if (Math.abs(l - L.m) > 3 * sl || Math.abs(a - A.m) > 3 * sa || Math.abs(b - B.m) > 3 * sb) continue;
    n++;
    ml += l;
    ma += a;
    mb += b;
    sll += l * l;
    saa += a * a;
    sbb += b * b;
    sab += a * b;
  }
  if (n < 50) return undefined;
  ml /= n;
  ma /= n;
  mb /= n;
  const vl = Math.max(sll / n - ml * ml, MIN_L_STD * MIN_L_STD);
  const vaa = Math.max(saa / n - ma * ma, MIN_AB_STD * MIN_AB_STD);
  const vbb = Math.max(sbb / n - mb * mb, MIN_AB_STD * MIN_AB_STD);
  const vab = sab / n - ma * mb;
  const det = vaa * vbb - vab * vab;
  return { a: ma, b: mb, iaa: vbb / det, iab: -vab / det, ibb: vaa / det, l: ml, lStd: Math.sqrt(vl) };
}

/** Chroma distance beyond which a pixel is not skin (in spreads: Mahalanobis over a, b). */
const SKIN_AB = 3.5;
/** Lightness this many spreads (and at least this many L units) away is not skin: hair, a black bar. */
const SKIN_L_SPREADS = 3.5;
const SKIN_L_MIN = 28;

/** 1 where the pixel is not skin by the model, over the pixels where `use` is non-zero. */
export function nonSkinMask(lab: Float32Array, use: Uint8Array, m: SkinModel): Uint8Array {
  const out = bytes(use.length);
  const lBand = Math.max(SKIN_L_SPREADS * m.lStd, SKIN_L_MIN);
  const ab2 = SKIN_AB * SKIN_AB;
  for (let i = 0; i < use.length; i++) {
    if (!use[i]) continue;
    const dl = lab[i * 3]! - m.l;
    const da = lab[i * 3 + 1]! - m.a;
    const db = lab[i * 3 + 2]! - m.b;
    const d2 = da * da * m.iaa + 2 * da * db * m.iab + db * db * m.ibb;
    if (d2 > ab2 || Math.abs(dl) > lBand) out[i] = 1;
  }
  return out;
}

/**
 * Soft occlusion weight 0..1 from a binary mask: grown by one pixel (the occluder's anti-aliased
 * edge stays the target's), then two 3x3 box blurs, so the new face meets the occluder over ~2 px.
 */
export function softenMask(mask: Uint8Array, w: number, h: number): Float32Array {
  if (!mask.includes(1)) return floats(mask.length);
  const a = featherMask(dilate(mask, w, h), w, h, 1);
  // Fully occluded pixels stay exactly 1 (they must not change at all).
  for (let i = 0; i < a.length; i++) if (mask[i]) a[i] = 1;
  return a;
}

/** Monomials x^i y^j with i + j <= degree, by degree (a lower degree's are a prefix: light-order.ts reads them so). */
function terms(degree: number): [number, number][] {
  const out: [number, number][] = [];
  for (let d = 0; d <= degree; d++) for (let i = d; i >= 0; i--) out.push([i, d - i]);
  return out;
}

/** Solves the symmetric positive (semi)definite system A x = b (Gaussian elimination, tiny ridge). */
export function solve(A: Float64Array, b: Float64Array, n: number): Float64Array {
  const M = Float64Array.from(A);
  const x = Float64Array.from(b);
  for (let i = 0; i < n; i++) M[i * n + i] = M[i * n + i]! * (1 + 1e-9) + 1e-9;
  for (let c = 0; c < n; c++) {
    let p = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(M[r * n + c]!) > Math.abs(M[p * n + c]!)) p = r;
    if (p !== c) {
      for (let k = 0; k < n; k++) [M[c * n + k], M[p * n + k]] = [M[p * n + k]!, M[c * n + k]!];
      [x[c], x[p]] = [x[p]!, x[c]!];
    }
    const d = M[c * n + c]!;
    if (Math.abs(d) < 1e-12) continue;
    for (let r = c + 1; r < n; r++) {
      const f = M[r * n + c]! / d;
      if (f === 0) continue;
      for (let k = c; k < n; k++) M[r * n + k] = M[r * n + k]! - f * M[c * n + k]!;
      x[r] = x[r]! - f * x[c]!;
    }
  }
  for (let c = n - 1; c >= 0; c--) {
    let s = x[c]!;
    for (let k = c + 1; k < n; k++) s -= M[c * n + k]! * x[k]!;
    const d = M[c * n + c]!;
    x[c] = Math.abs(d) < 1e-12 ? 0 : s / d;
  }
  return x;
}

/** Monomials of one polynomial surface over a w × h plane, with per-column and per-row powers (no pow() per pixel). */
export interface PolyBasis {
  /** Number of terms, and degree + 1. */
  m: number;
  d1: number;
  /** Powers of the normalised x per column, and of y per row (d1 each). */
  up: Float64Array;
  vp: Float64Array;
  /** Exponents of x and of y of each term. */
  ti: Int32Array;
  tj: Int32Array;
  /** The terms at the last `fillBasis` pixel. */
  basis: Float64Array;
}

export function polyBasis(w: number, h: number, deg: number): PolyBasis {
  const cx = w / 2;
  const cy = h / 2;
  const s = 2 / Math.max(w, h);
  const T = terms(deg);
  const d1 = deg + 1;
  const up = new Float64Array(w * d1);
  const vp = new Float64Array(h * d1);
  for (let x = 0; x < w; x++) for (let k = 0; k <= deg; k++) up[x * d1 + k] = ((x - cx) * s) ** k;
  for (let y = 0; y < h; y++) for (let k = 0; k <= deg; k++) vp[y * d1 + k] = ((y - cy) * s) ** k;
  const ti = Int32Array.from(T, (t) => t[0]);
  const tj = Int32Array.from(T, (t) => t[1]);
  return { m: T.length, d1, up, vp, ti, tj, basis: new Float64Array(T.length) };
}

/** The basis at (x, y); returns the surface `coef` there (0 when not given). */
export function fillBasis(B: PolyBasis, x: number, y: number, coef?: Float64Array): number {
  for (let k = 0; k < B.m; k++) B.basis[k] = B.up[x * B.d1 + B.ti[k]!]! * B.vp[y * B.d1 + B.tj[k]!]!;
  let f = 0;
  if (coef) for (let k = 0; k < B.m; k++) f += coef[k]! * B.basis[k]!;
  return f;
}

/** One channel's difference dst − src and where it is fitted (weight > 0), sampled every `step` px. */
export interface SurfaceData {
  src: Float32Array;
  dst: Float32Array;
  weight: Float32Array;
  channel: number;
  w: number;
  h: number;
  step: number;
}

/**
 * Weighted least-squares fit of the surface to the data's difference, leaving out samples more than
 * `cut` off `prev` (when given). Returns the coefficients (undefined: nothing to fit) and, on a first
 * pass, the raw differences of the samples used (for the robust spread).
 */
function fitPass(
  B: PolyBasis,
  D: SurfaceData,
  prev?: { coef: Float64Array; cut: number },
): { coef: Float64Array; diffs: Float64Array } | undefined {
  const { m } = B;
  const A = new Float64Array(m * m);
  const b = new Float64Array(m);
  const diffs = new Float64Array(prev ? 0 : Math.ceil(D.h / D.step) * Math.ceil(D.w / D.step));
  let nres = 0;
  for (let y = 0; y < D.h; y += D.step) {
    for (let x = 0; x < D.w; x += D.step) {
      const i = y * D.w + x;
      const wt = D.weight[i]!;
      if (wt <= 0) continue;
      const d = D.dst[i * 3 + D.channel]! - D.src[i * 3 + D.channel]!;
      const f = fillBasis(B, x, y, prev?.coef);
      if (prev && Math.abs(d - f) > prev.cut) continue;
      for (let r = 0; r < m; r++) {
        const br = B.basis[r]! * wt;
        b[r] = b[r]! + br * d;
        for (let k = r; k < m; k++) A[r * m + k] = A[r * m + k]! + br * B.basis[k]!;
      }
      if (!prev) diffs[nres++] = d;
    }
  }
  for (let r = 0; r < m; r++) for (let k = 0; k < r; k++) A[r * m + k] = A[k * m + r]!;
  if (A[0]! <= 0) return undefined;
  return { coef: solve(A, b, m), diffs: diffs.subarray(0, nres) };
}

/**
 * Robust fit: once, then again without the samples more than 2.5 robust spreads (at least `floor`)
 * off the first fit.
 */
function fitSurface(B: PolyBasis, D: SurfaceData, floor: number): Float64Array | undefined {
  const first = fitPass(B, D);
  if (!first) return undefined;
  const res = first.diffs;
  let k = 0;
  for (let y = 0; y < D.h; y += D.step) {
    for (let x = 0; x < D.w; x += D.step) {
      if (D.weight[y * D.w + x]! <= 0) continue;
      res[k] = Math.abs(res[k]! - fillBasis(B, x, y, first.coef));
      k++;
    }
  }
  const cut = Math.max(2.5 * 1.4826 * (res.length ? medianInPlace(res) : 0), floor);
  return fitPass(B, D, { coef: first.coef, cut })?.coef;
}

/** Adds the surface to `lab`'s channel where `use` is set. */
function addSurface(
  B: PolyBasis,
  coef: Float64Array,
  lab: Float32Array,
  c: number,
  use: Uint8Array,
  w: number,
  h: number,
) {
  // f(x, y) = Σ_i u^i (Σ_j c_ij v^j): per row a polynomial in u, so a few multiply-adds per pixel.
  const { d1, up, vp, ti, tj } = B;
  const rowCoef = new Float64Array(d1);
  for (let y = 0; y < h; y++) {
    rowCoef.fill(0);
    for (let k = 0; k < B.m; k++) rowCoef[ti[k]!] = rowCoef[ti[k]!]! + coef[k]! * vp[y * d1 + tj[k]!]!;
    for (let x = 0; x < w; x++) {
      const i = y * w + x;
      if (!use[i]) continue;
      let f = 0;
      for (let q = 0; q < d1; q++) f += rowCoef[q]! * up[x * d1 + q]!;
      lab[i * 3 + c] = lab[i * 3 + c]! + f;
    }
  }
}

/**
 * Lighting transfer: adds to `srcLab` (in place, where `use` is set) a smooth surface fitted to
 * dst − src over the pixels with weight > 0: a polynomial of `degrees[c]` in x and y per channel,
 * fitted by weighted least squares, twice (the second time without pixels more than 2.5 robust
 * spreads off the first fit: a spot of make-up or a shadow edge the skin model let through). Pixels
 * are sampled on a grid `step` apart, which is plenty for a handful of coefficients. `floors`: the
 * smallest robust cut per channel, in its units (3 L* or a*b* units; recolor.ts fits lightness in
 * ln(L* + 16)).
 */
export function transferLighting(
  srcLab: Float32Array,
  dstLab: Float32Array,
  weight: Float32Array,
  use: Uint8Array,
  w: number,
  h: number,
  degrees: readonly [number, number, number],
  step = 2,
  floors: readonly [number, number, number] = [3, 3, 3],
): void {
  for (let c = 0; c < 3; c++) {
    if (degrees[c]! < 0) continue; // that channel is not corrected here
    const B = polyBasis(w, h, degrees[c]!);
    const coef = fitSurface(B, { src: srcLab, dst: dstLab, weight, channel: c, w, h, step }, floors[c]!);
    // Nothing to fit: the original returned here, leaving this and later channels alone.
    if (!coef) return;
    addSurface(B, coef, srcLab, c, use, w, h);
  }
}
