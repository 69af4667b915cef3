/**
 * Colour transfer in CIELAB (D65): Lab separates lightness from chroma and is roughly perceptually
 * uniform, so matching each channel's mean and spread (Reinhard et al. 2001) moves the source skin
 * to the target's tone without the hue shifts that per-channel RGB matching produces.
 */
import type { Region } from './geometry.js';
import { copyOf, floats } from './scratch.js';
import type { RgbImage } from './types.js';

const SRGB_TO_LINEAR = new Float32Array(256);
for (let i = 0; i < 256; i++) {
  const c = i / 255;
  SRGB_TO_LINEAR[i] = c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
}

const XN = 0.95047;
const YN = 1.0;
const ZN = 1.08883;

function fLab(t: number): number {
  return t > 0.008856451679 ? Math.cbrt(t) : t * 7.787037037 + 16 / 116;
}

function fLabInv(t: number): number {
  return t > 0.206896552 ? t * t * t : (t - 16 / 116) / 7.787037037;
}

/** Linear light (0..1) to sRGB 0..255 through a table: pow() per channel per pixel is the hot spot. */
const LUT_SIZE = 4096;
const LINEAR_TO_SRGB = new Float32Array(LUT_SIZE + 1);
for (let i = 0; i <= LUT_SIZE; i++) {
  const c = i / LUT_SIZE;
  LINEAR_TO_SRGB[i] = 255 * (c <= 0.0031308 ? c * 12.92 : 1.055 * c ** (1 / 2.4) - 0.055);
}

function linearToSrgb(c: number): number {
  if (c >= 1) return 255;
  // The curve is steep near 0: below the first table step use the exact linear segment.
  if (c < 0.0031308) return c * 12.92 * 255;
  const x = c * LUT_SIZE;
  const i = Math.floor(x);
  const f = x - i;
  return LINEAR_TO_SRGB[i]! * (1 - f) + LINEAR_TO_SRGB[i + 1]! * f;
}

function srgbLinear(v: number): number {
  // Float input (warped pixels are fractional): interpolate the table.
  const x = v < 0 ? 0 : v > 255 ? 255 : v;
  const i = Math.min(254, Math.floor(x));
  const f = x - i;
  return SRGB_TO_LINEAR[i]! * (1 - f) + SRGB_TO_LINEAR[i + 1]! * f;
}

/** The pixels of `img` inside `region`, as floats (3 a pixel, scratch). */
export function regionRgb(img: RgbImage, region: Region): Float32Array {
  const { width: w, height: h } = region;
  const rgb = floats(w * h * 3);
  for (let y = 0; y < h; y++) {
    const row = ((region.top + y) * img.width + region.left) * 3;
    for (let i = 0; i < w * 3; i++) rgb[y * w * 3 + i] = img.data[row + i]!;
  }
  return rgb;
}

/** Interleaved sRGB (0..255 floats) to interleaved Lab, for the pixels where `use` is non-zero. */
export function rgbToLab(rgb: Float32Array, use?: Uint8Array): Float32Array {
  const out = floats(rgb.length);
  const n = rgb.length / 3;
  for (let i = 0; i < n; i++) {
    if (use && !use[i]) continue;
    const o = i * 3;
    linearToLab(srgbLinear(rgb[o]!), srgbLinear(rgb[o + 1]!), srgbLinear(rgb[o + 2]!), out, o);
  }
  return out;
}

/** Lab of linear r, g, b (0..1) into out[o..o + 3]. */
function linearToLab(r: number, g: number, b: number, out: Float32Array, o: number): void {
  const x = fLab((0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / XN);
  const y = fLab((0.2126729 * r + 0.7151522 * g + 0.072175 * b) / YN);
  const z = fLab((0.0193339 * r + 0.119192 * g + 0.9503041 * b) / ZN);
  out[o] = 116 * y - 16;
  out[o + 1] = 500 * (x - y);
  out[o + 2] = 200 * (y - z);
}

/**
 * The Lab of the last sRGB colours converted from bytes, by colour (24 bits) hashed into 2^16
 * slots: a face region repeats most of its colours, and a hit costs a copy instead of three cube
 * roots (the same numbers: a slot holds what linearToLab gave for that colour).
 */
const CACHE_BITS = 16;
const cachedColour = new Int32Array(1 << CACHE_BITS).fill(-1);
const cachedLab = new Float32Array(3 << CACHE_BITS);

/**
 * The Lab (3 per pixel, scratch) of `img`'s pixels inside `region`, where `use` (region-sized) is
 * non-zero: rgbToLab(regionRgb(img, region), use) without the float copy, whole-number colours
 * read through the colour cache.
 */
export function regionLab(img: RgbImage, region: Region, use?: Uint8Array): Float32Array {
  const { width: w, height: h } = region;
  const out = floats(w * h * 3);
  const data = img.data;
  for (let y = 0; y < h; y++) {
    for (let x = 0, i = y * w, p = ((region.top + y) * img.width + region.left) * 3; x < w; x++, i++, p += 3) {
      if (use && !use[i]) continue;
      const colour = (data[p]! << 16) | (data[p + 1]! << 8) | data[p + 2]!;
      // Fibonacci hashing: neighbouring colours land in different slots.
      const slot = Math.imul(colour, 0x9e3779b1) >>> (32 - CACHE_BITS);
      const c = slot * 3;
      if (cachedColour[slot] !== colour) {
        cachedColour[slot] = colour;
        // Whole numbers: what srgbLinear gives them, exactly.
        linearToLab(
          SRGB_TO_LINEAR[data[p]!]!,
          SRGB_TO_LINEAR[data[p + 1]!]!,
          SRGB_TO_LINEAR[data[p + 2]!]!,
          cachedLab,
          c,
        );
      }
      const o = i * 3;
      out[o] = cachedLab[c]!;
      out[o + 1] = cachedLab[c + 1]!;
      out[o + 2] = cachedLab[c + 2]!;
    }
  }
  return out;
}

/** Interleaved Lab back to interleaved sRGB floats (0..255, clamped), where `use` is non-zero. */
export function labToRgb(lab: Float32Array, use?: Uint8Array): Float32Array {
  const out = floats(lab.length);
  const n = lab.length / 3;
  for (let i = 0; i < n; i++) {
    if (use && !use[i]) continue;
    const o = i * 3;
    const fy = (lab[o]! + 16) / 116;
    const fx = fy + lab[o + 1]! / 500;
    const fz = fy - lab[o + 2]! / 200;
    const x = fLabInv(fx) * XN;
    const y = fLabInv(fy) * YN;
    const z = fLabInv(fz) * ZN;
    const r = 3.2404542 * x - 1.5371385 * y - 0.4985314 * z;
    const g = -0.969266 * x + 1.8760108 * y + 0.041556 * z;
    const b = 0.0556434 * x - 0.2040259 * y + 1.0572252 * z;
    out[o] = clamp255(linearToSrgb(Math.max(0, r)));
    out[o + 1] = clamp255(linearToSrgb(Math.max(0, g)));
    out[o + 2] = clamp255(linearToSrgb(Math.max(0, b)));
  }
  return out;
}

function clamp255(v: number): number {
  return v < 0 ? 0 : v > 255 ? 255 : v;
}

/**
 * Lightness as a change of light acts on it. L* + 16 is 116 Y^(1/3), so a light k times as bright
 * scales it by k^(1/3): in ln(L* + 16) a change of light is an offset, and a pattern on the skin (a
 * highlight, a pore, a freckle) keeps its contrast as a ratio. Added in L* instead, the source's
 * texture kept its L* contrast on a target three times darker: three times too strong there.
 */
export function toLogLightness(lab: Float32Array, use: Uint8Array): void {
  for (let i = 0; i < use.length; i++) {
    if (!use[i]) continue;
    // Through a table (Math.log per pixel cost ~3 ms on a 200 px face): L* in [-15, 113], linear
    // between entries (error 1e-4 near black, 1e-7 on skin); beyond it (past white) exactly.
    const x = (lab[i * 3]! + 15) * LOG_STEPS;
    const k = Math.floor(x);
    lab[i * 3] =
      k >= 0 && k < LOG_TABLE.length - 1
        ? LOG_TABLE[k]! + (x - k) * (LOG_TABLE[k + 1]! - LOG_TABLE[k]!)
        : Math.log(Math.max(lab[i * 3]!, -15) + 16);
  }
}

/** The inverse of toLogLightness. */
export function fromLogLightness(lab: Float32Array, use: Uint8Array): void {
  for (let i = 0; i < use.length; i++) {
    if (!use[i]) continue;
    const x = lab[i * 3]! * EXP_STEPS;
    const k = Math.floor(x);
    lab[i * 3] =
      k >= 0 && k < EXP_TABLE.length - 1
        ? EXP_TABLE[k]! + (x - k) * (EXP_TABLE[k + 1]! - EXP_TABLE[k]!) - 16
        : Math.exp(lab[i * 3]!) - 16;
  }
}

/**
 * Chroma as a change of light acts on it, the counterpart of toLogLightness: a light k times as
 * bright scales L* + 16, a* and b* alike (each is a difference of cube roots of X, Y, Z), so
 * a* / (L* + 16) and b* / (L* + 16) are the surface's own; `unit` (an L* + 16, the target skin's)
 * keeps them in a*, b* units there. `light` holds the L* of each pixel (interleaved Lab; it may
 * be `lab` itself). Moved in a*, b* units, a faint yellow patch of a bright source and the
 * target's yellow highlight beside its nose went onto the new face's darker pixels there whole:
 * the sheet's sample5 face 0, an olive band by the nose (colour-photos.test.ts).
 */
export function toRelativeChroma(lab: Float32Array, light: Float32Array, use: Uint8Array, unit: number): void {
  for (let i = 0; i < use.length; i++) {
    if (!use[i]) continue;
    const f = unit / Math.max(1, light[i * 3]! + 16);
    lab[i * 3 + 1] = lab[i * 3 + 1]! * f;
    lab[i * 3 + 2] = lab[i * 3 + 2]! * f;
  }
}

/** The inverse of toRelativeChroma, at each pixel's own (new) L* in `lab`. */
export function fromRelativeChroma(lab: Float32Array, use: Uint8Array, unit: number): void {
  for (let i = 0; i < use.length; i++) {
    if (!use[i]) continue;
    const f = Math.max(1, lab[i * 3]! + 16) / unit;
    lab[i * 3 + 1] = lab[i * 3 + 1]! * f;
    lab[i * 3 + 2] = lab[i * 3 + 2]! * f;
  }
}

/** ln(L* + 16) at L* = -15 + k / LOG_STEPS, over [-15, 113]. */
const LOG_STEPS = 32;
const LOG_TABLE = Float64Array.from({ length: 128 * LOG_STEPS + 1 }, (_, k) => Math.log(1 + k / LOG_STEPS));
/** exp(v) at v = k / EXP_STEPS, over [0, 5] (L* + 16 from 1 to 148). */
const EXP_STEPS = 1024;
const EXP_TABLE = Float64Array.from({ length: 5 * EXP_STEPS + 1 }, (_, k) => Math.exp(k / EXP_STEPS));

export interface ChannelStats {
  mean: [number, number, number];
  std: [number, number, number];
}

/**
 * Skin colour statistics (CIELAB, lightness as ln(L* + 16): see toLogLightness) of the warped source
 * face and of the target face.
 */
export interface ColorStats {
  src: ChannelStats;
  dst: ChannelStats;
  /** The lightness surface's degree (light-order.ts): given, the one to use; measured, the one used. */
  light?: LightChoice | undefined;
}

/** The lightness surface's degree and the held-out error of each degree (light-order.ts heldOutErrors). */
export interface LightChoice {
  errors: number[];
  degree: number;
}

/** Weighted mean and standard deviation per channel (weights: e.g. the inner face mask). */
export function channelStats(values: Float32Array, weight: Float32Array): ChannelStats {
  const sum = [0, 0, 0];
  const sq = [0, 0, 0];
  let wsum = 0;
  for (let i = 0; i < weight.length; i++) {
    const w = weight[i]!;
    if (w <= 0) continue;
    wsum += w;
    for (let c = 0; c < 3; c++) {
      const v = values[i * 3 + c]!;
      sum[c]! += w * v;
      sq[c]! += w * v * v;
    }
  }
  const mean: [number, number, number] = [0, 0, 0];
  const std: [number, number, number] = [0, 0, 0];
  if (wsum > 0) {
    for (let c = 0; c < 3; c++) {
      mean[c] = sum[c]! / wsum;
      std[c] = Math.sqrt(Math.max(0, sq[c]! / wsum - mean[c]! * mean[c]!));
    }
  }
  return { mean, std };
}

/**
 * Bounds of the spread ratio (target / source) per channel. Lightness is never compressed: that
 * would flatten the face's detail (a soft patch at 100 %); the lighting step matches the target's
 * broad shading instead. Skin chroma may be compressed much further than it may be stretched: a
 * source lit blue from one side and orange from the other has four times the b* spread of evenly
 * lit skin, and at the old bound (0.75) its blue nose and lids stayed blue; stretched, noise grows.
 * Lightness is matched in ln(L* + 16), where 1.5 is the cap (at 1.33 sample5 face 4 lost 0.02 of
 * identity, measured on the contact sheet).
 */
const SPREAD_BOUNDS: readonly (readonly [number, number])[] = [
  [1, 1.5],
  [0.2, 1.33],
  [0.2, 1.33],
];

/** A spread ratio (target / source) of channel `c` (0: lightness, 1 and 2: chroma) within SPREAD_BOUNDS. */
export function boundedSpread(c: number, ratio: number): number {
  return Math.min(SPREAD_BOUNDS[c]![1], Math.max(SPREAD_BOUNDS[c]![0], ratio));
}

/** The factor each channel's deviation from the mean is scaled by (see SPREAD_BOUNDS). */
export function spreadGains(from: ChannelStats, to: ChannelStats): [number, number, number] {
  const k: [number, number, number] = [1, 1, 1];
  for (let c = 0; c < 3; c++) k[c] = boundedSpread(c, from.std[c]! > 1e-3 ? to.std[c]! / from.std[c]! : 1);
  return k;
}

/**
 * Moves `values` (Lab, in place) from the `from` statistics to the `to` statistics. The spread ratio is
 * clamped (SPREAD_BOUNDS): an extreme ratio (a face half in shadow, a tiny region) would amplify noise
 * or flatten the face.
 */
export function transferStats(values: Float32Array, use: Uint8Array, from: ChannelStats, to: ChannelStats): void {
  const k = spreadGains(from, to);
  for (let i = 0; i < use.length; i++) {
    if (!use[i]) continue;
    for (let c = 0; c < 3; c++) {
      const o = i * 3 + c;
      values[o] = (values[o]! - from.mean[c]!) * k[c]! + to.mean[c]!;
    }
  }
}

/**
 * One running-sum box pass along lines. `len` pixels per line, `lines` lines; `step` moves along a
 * line and `lineStep` to the next line (both in pixels; 4 floats per pixel). Edges count as zero,
 * which the normalisation by the blurred weight makes harmless.
 */
function boxPass(
  src: Float32Array,
  dst: Float32Array,
  len: number,
  lines: number,
  r: number,
  step: number,
  lineStep: number,
): void {
  const norm = 1 / (2 * r + 1);
  const s4 = step * 4;
  for (let l = 0; l < lines; l++) {
    const base = l * lineStep * 4;
    // Four running sums as locals: this is one of the swap's hottest loops.
    let a0 = 0;
    let a1 = 0;
    let a2 = 0;
    let a3 = 0;
    for (let k = 0, o = base; k <= Math.min(r, len - 1); k++, o += s4) {
      a0 += src[o]!;
      a1 += src[o + 1]!;
      a2 += src[o + 2]!;
      a3 += src[o + 3]!;
    }
    for (let x = 0, o = base; x < len; x++, o += s4) {
      dst[o] = a0 * norm;
      dst[o + 1] = a1 * norm;
      dst[o + 2] = a2 * norm;
      dst[o + 3] = a3 * norm;
      if (x + r + 1 < len) {
        const oa = o + (r + 1) * s4;
        a0 += src[oa]!;
        a1 += src[oa + 1]!;
        a2 += src[oa + 2]!;
        a3 += src[oa + 3]!;
      }
      if (x - r >= 0) {
        const os = o - r * s4;
        a0 -= src[os]!;
        a1 -= src[os + 1]!;
        a2 -= src[os + 2]!;
        a3 -= src[os + 3]!;
      }
    }
  }
}

/** Box size giving three box passes the spread of a Gaussian of `sigma` (grid cells). */
function boxRadius(sigma: number): number {
  return Math.max(1, Math.round((Math.sqrt(4 * sigma * sigma + 1) - 1) / 2));
}

/** Three box passes each way (≈ Gaussian of `sigma` cells) over a grid of 4 floats per cell, in place. */
function blurGrid(a: Float32Array, lw: number, lh: number, sigma: number): void {
  const r = boxRadius(sigma);
  const b = floats(a.length);
  for (let pass = 0; pass < 3; pass++) {
    boxPass(a, b, lw, lh, r, 1, lw); // horizontal
    boxPass(b, a, lh, lw, r, lw, 1); // vertical (rows and columns swapped)
  }
}

/**
 * The `weight`-weighted local mean of each Lab channel at scale `sigma`, where `use` is set (NaN
 * where no weight lies near): the colour of the skin around each pixel. On a grid sigma/3 coarser,
 * as transferLocal.
 */
export function localMean(
  lab: Float32Array,
  weight: Float32Array,
  use: Uint8Array,
  width: number,
  height: number,
  sigma: number,
): Float32Array {
  const f = Math.max(1, Math.floor(sigma / 3));
  const lw = Math.ceil(width / f);
  const lh = Math.ceil(height / f);
  const a = floats(lw * lh * 4);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = y * width + x;
      const wt = weight[i]!;
      if (wt <= 0) continue;
      const o = (Math.floor(y / f) * lw + Math.floor(x / f)) * 4;
      for (let c = 0; c < 3; c++) a[o + c] = a[o + c]! + lab[i * 3 + c]! * wt;
      a[o + 3] = a[o + 3]! + wt;
    }
  }
  blurGrid(a, lw, lh, sigma / f);
  const out = floats(width * height * 3).fill(Number.NaN);
  const v = new Float64Array(4);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = y * width + x;
      if (!use[i]) continue;
      sampleGrid(a, lw, lh, f, x, y, v);
      if (v[3]! <= 1e-6 * f * f) continue;
      for (let c = 0; c < 3; c++) out[i * 3 + c] = v[c]! / v[3]!;
    }
  }
  return out;
}

/**
 * Local (low-frequency) colour transfer: adds blur(target) - blur(source) to the source, in Lab, so
 * the new face takes on the target's lighting and local skin tone (a face lit blue on one side and
 * orange on the other otherwise stays patchy) while keeping its own detail. Both blurs use the same
 * weights, so no background leaks in; the caller gives skin-only weights so that dark eye make-up or
 * lipstick in one image is not read as "lighting" and painted onto the other. `sigma` is per channel.
 *
 * With equal weights, blur(dst·w) - blur(src·w) = blur((dst - src)·w), normalised by blur(w). The
 * result is smooth at scale sigma, so it is computed on a grid sigma/3 coarser (box-averaged down,
 * three box-blur passes ≈ Gaussian, bilinear back up): a large face costs about as little as a small one.
 */
export function transferLocal(
  srcLab: Float32Array,
  dstLab: Float32Array,
  weight: Float32Array,
  use: Uint8Array,
  width: number,
  height: number,
  sigma: readonly [number, number, number],
): void {
  for (const sg of new Set(sigma)) {
    if (sg <= 0) continue; // that channel is not corrected here
    const f = Math.max(1, Math.floor(sg / 3));
    const lw = Math.ceil(width / f);
    const lh = Math.ceil(height / f);
    // Per coarse cell: (dst - src)·w for the three channels, then w.
    const a = floats(lw * lh * 4);
    for (let y = 0; y < height; y++) {
      const row = Math.floor(y / f) * lw;
      for (let x = 0; x < width; x++) {
        const i = y * width + x;
        const wt = weight[i]!;
        if (wt <= 0) continue;
        const o = (row + Math.floor(x / f)) * 4;
        for (let c = 0; c < 3; c++) a[o + c] = a[o + c]! + (dstLab[i * 3 + c]! - srcLab[i * 3 + c]!) * wt;
        a[o + 3] = a[o + 3]! + wt;
      }
    }
    blurGrid(a, lw, lh, sg / f);
    const c0 = sigma[0] === sg;
    const c1 = sigma[1] === sg;
    const c2 = sigma[2] === sg;
    // Bilinear back up (on a grid as fine as the image, f = 1, that is the cell itself).
    const v = new Float64Array(4);
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < width; x++) {
        const i = y * width + x;
        if (!use[i]) continue;
        sampleGrid(a, lw, lh, f, x, y, v);
        const wt = v[3]!;
        // Far from any skin (blurred weight ~0) there is nothing to learn from: leave the pixel.
        if (wt <= 1e-6 * f * f) continue;
        const q = i * 3;
        if (c0) srcLab[q] = srcLab[q]! + v[0]! / wt;
        if (c1) srcLab[q + 1] = srcLab[q + 1]! + v[1]! / wt;
        if (c2) srcLab[q + 2] = srcLab[q + 2]! + v[2]! / wt;
      }
    }
  }
}

/**
 * The chroma correction (a*, b*) that holds the source's mid-scale chroma to the target's: the
 * `weight`-weighted local mean of each face's a* and b* at `fine` minus that at `broad` (px) is its
 * band; where the source's band is further from 0 than the target's plus `slack`, the excess. On one
 * grid (step about fine / 3, at least 2 px: it is smooth at that scale), per cell, then read back
 * bilinearly: `out(i, da, db)` is called for every pixel where `use` is set with the correction to
 * subtract there.
 */
export function chromaBandExcess(
  src: Float32Array,
  dst: Float32Array,
  weight: Float32Array,
  use: Uint8Array,
  width: number,
  height: number,
  scales: { fine: number; broad: number; slack: number },
  out: (i: number, da: number, db: number) => void,
): void {
  const f = Math.max(3, Math.floor(scales.fine / 2));
  const lw = Math.ceil(width / f);
  const lh = Math.ceil(height / f);
  // Per cell: a*·w, b*·w, w (and one spare float) of each face.
  const gs = floats(lw * lh * 4);
  const gt = floats(lw * lh * 4);
  for (let y = 0; y < height; y++) {
    const row = Math.floor(y / f) * lw;
    for (let x = 0; x < width; x++) {
      const i = y * width + x;
      const wt = weight[i]!;
      if (wt <= 0) continue;
      const o = (row + Math.floor(x / f)) * 4;
      gs[o] = gs[o]! + src[i * 3 + 1]! * wt;
      gs[o + 1] = gs[o + 1]! + src[i * 3 + 2]! * wt;
      gs[o + 2] = gs[o + 2]! + wt;
      gt[o] = gt[o]! + dst[i * 3 + 1]! * wt;
      gt[o + 1] = gt[o + 1]! + dst[i * 3 + 2]! * wt;
      gt[o + 2] = gt[o + 2]! + wt;
    }
  }
  const bs = copyOf(gs);
  const bt = copyOf(gt);
  blurGrid(gs, lw, lh, scales.fine / f);
  blurGrid(gt, lw, lh, scales.fine / f);
  blurGrid(bs, lw, lh, scales.broad / f);
  blurGrid(bt, lw, lh, scales.broad / f);
  // Per cell: the source's band where it exceeds the target's (NaN where no skin is near: none).
  const excess = floats(lw * lh * 4);
  for (let o = 0; o < excess.length; o += 4) {
    if (gs[o + 2]! <= 1e-6 || bs[o + 2]! <= 1e-6) continue;
    for (let c = 0; c < 2; c++) {
      const e = gs[o + c]! / gs[o + 2]! - bs[o + c]! / bs[o + 2]!;
      const cap = Math.abs(gt[o + c]! / gt[o + 2]! - bt[o + c]! / bt[o + 2]!) + scales.slack;
      excess[o + c] = e > cap ? e - cap : e < -cap ? e + cap : 0;
    }
  }
  const v = new Float64Array(4);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = y * width + x;
      if (!use[i]) continue;
      sampleGrid(excess, lw, lh, f, x, y, v);
      if (v[0] !== 0 || v[1] !== 0) out(i, v[0]!, v[1]!);
    }
  }
}

/**
 * A feature's own chroma (relative to the skin around it) is compressed no further than this: it is
 * mostly its own colour (a source's eyeliner), but partly a light's that changes across it.
 */
const FEATURE_SPREAD_MIN = 0.75;
/**
 * ...and stretched no further than this: a target whose skin's chroma spreads wider (darker, more
 * saturated skin, or two lights) does not make the source's lips redder. Stretched with the skin
 * (up to 1.33), sample5 face 4's new lips came out a deeper red than her own (lips less cheeks, a*
 * 10.1 against her 8.9; now 8.5); the sheet's medians 0.409 -> 0.407 raw, 0.393 -> 0.390 upright.
 */
const FEATURE_SPREAD_MAX = 1;

/** What settleChroma needs besides the corrected colours. */
export interface ChromaSettle {
  /** The source's Lab before any correction, and after the smooth steps (statistics, surfaces). */
  orig: Float32Array;
  smooth: Float32Array;
  /** The source statistics the spread was scaled about, and the spread gains (spreadGains). */
  from: ChannelStats;
  gains: readonly [number, number, number];
  /** Feature zone of each pixel (0: none, 1..255) and how fully it is in it (0..1, soft at the margin). */
  zone: Uint8Array;
  inZone: Float32Array;
  /** The source's skin colour around each pixel (localMean of `orig`; NaN: none near). */
  skin: Float32Array;
  /**
   * A feature of one albedo (the lips): 1 on it (between their outer and inner lines: what varies
   * across it is the light), 2 in its opening (the teeth: a feature of their own), 0 elsewhere, in
   * its zone the skin around it (see settleChroma).
   */
  even: Uint8Array;
  /** The source's light axis (light-axis.ts): a feature's own colour is what lies across it. */
  axis?: { ux: number; uy: number } | undefined;
}

/** Per zone: the local correction's mean (a*, b*), and an even feature's own colour's (see settleChroma). */
interface ZoneMeans {
  local: Float64Array;
  own: Float64Array;
}

function zoneMeans(after: Float32Array, use: Uint8Array, p: ChromaSettle): ZoneMeans {
  const local = new Float64Array(256 * 3);
  const own = new Float64Array(256 * 3);
  for (let i = 0; i < use.length; i++) {
    const z = p.zone[i]!;
    if (!z || !use[i]) continue;
    local[z * 3] = local[z * 3]! + 1;
    for (let c = 1; c < 3; c++) local[z * 3 + c] = local[z * 3 + c]! + after[i * 3 + c]! - p.smooth[i * 3 + c]!;
    if (p.even[i] !== 1 || Number.isNaN(p.skin[i * 3]!)) continue;
    own[z * 3] = own[z * 3]! + 1;
    for (let c = 1; c < 3; c++) own[z * 3 + c] = own[z * 3 + c]! + p.orig[i * 3 + c]! - p.skin[i * 3 + c]!;
  }
  for (const m of [local, own]) {
    for (let z = 1; z < 256; z++)
      for (let c = 1; c < 3; c++) if (m[z * 3]! > 0) m[z * 3 + c] = m[z * 3 + c]! / m[z * 3]!;
  }
  return { local, own };
}

/**
 * Settles the chroma correction `after - orig` (a*, b* relative to L* + 16, in place in `after`)
 * on the features. The correction splits into a field (what a pixel of the skin's mean colour gets: the mean shift and
 * the lighting surface, smooth across the face, then the low-pass of the skin's difference, local)
 * and the spread compression about the skin mean (which on skin takes off a coloured light's
 * share). Skin keeps both as they are. Inside a feature zone (brow, eye, mouth; softly over its
 * margin):
 * - the local part is one value, its mean over the zone (per pixel it is drawn from whichever skin
 *   lies nearest, the chin below the lower lip or the lid above an iris, and tints the parts apart);
 * - the compression is split into the light's share, the skin around the pixel compressed as skin
 *   is, and the feature's own colour against that skin, across the source's light axis (`axis`),
 *   held between FEATURE_SPREAD_MIN and FEATURE_SPREAD_MAX: along the axis, the difference is as
 *   much the light's change between the pixel and the skin around as the feature's (acrossAxis).
 *   The chroma is relative to L* + 16 (toRelativeChroma), so the light's share and the field,
 *   back in a*, b*, scale with the pixel's lightness: a dark iris carries less of a light's cast
 *   (and of the skin's mean shift) than the cheek beside it. Compressed about the skin's mean as
 *   a whole, a blue-lit iris and an orange-lit one (one albedo) came out 6 a* and
 *   b* units apart; so they agree, and keep the source's own colour relations.
 * - an even feature (the lips) is compressed as skin is, all of it, and its own colour, the mean
 *   over it against the skin around, added back held between FEATURE_SPREAD_MIN and MAX; the
 *   rest of its zone but its opening is skin. The skin around, a blur the face's scale wide, does
 *   not follow two lights meeting across the mouth: read per pixel against it, the README
 *   example's lips came out two-tone (lilac, orange at a corner and on the skin above it).
 */
export function settleChroma(after: Float32Array, use: Uint8Array, p: ChromaSettle): void {
  const means = zoneMeans(after, use, p);
  for (let i = 0; i < use.length; i++) if (use[i]) settlePixel(after, i, p, means);
}

function settlePixel(after: Float32Array, i: number, p: ChromaSettle, means: ZoneMeans): void {
  const z = p.zone[i]!;
  const t = z ? p.inZone[i]! : 0;
  const own = t > 0 ? ownColour(i, z, p, means) : NO_COLOUR;
  for (let c = 1; c < 3; c++) {
    const o = i * 3 + c;
    const spread = (p.gains[c]! - 1) * (p.orig[o]! - p.from.mean[c]!);
    let local = after[o]! - p.smooth[o]!;
    if (t > 0) local += t * (means.local[z * 3 + c]! - local);
    // Compressed (or stretched) as skin is, but for the feature's own colour, held within
    // FEATURE_SPREAD_MIN and FEATURE_SPREAD_MAX.
    const feature = Math.min(Math.max(p.gains[c]!, FEATURE_SPREAD_MIN), FEATURE_SPREAD_MAX) - p.gains[c]!;
    const field = p.smooth[o]! - p.orig[o]! - spread + local;
    after[o] = p.orig[o]! + field + spread + t * feature * own[c - 1]!;
  }
}

const NO_COLOUR = [0, 0] as const;

/**
 * The own colour (a*, b*) of the feature at pixel `i` (zone `z`) against the skin around: an even
 * feature's mean (the whole feature, under the lights the skin around it is under); none on the
 * skin of its zone; else the pixel's, across the light axis only.
 */
function ownColour(i: number, z: number, p: ChromaSettle, means: ZoneMeans): readonly [number, number] {
  // In an even feature's zone: the feature (1), its opening (2), or skin (0).
  const part = means.own[z * 3]! > 0 ? p.even[i]! : 2;
  if (part === 1) return [means.own[z * 3 + 1]!, means.own[z * 3 + 2]!];
  if (part === 0) return NO_COLOUR;
  // Against the skin around (the source's mean where none is known), read without a view per pixel.
  const q = i * 3;
  const known = !Number.isNaN(p.skin[q]!);
  const a = known ? p.skin[q + 1]! : p.from.mean[1];
  const b = known ? p.skin[q + 2]! : p.from.mean[2];
  return acrossAxis(p.orig[q + 1]! - a, p.orig[q + 2]! - b, p.axis);
}

/**
 * The part of the chroma difference (da, db) across the source's light axis `u`: along it a
 * difference is the light's as much as the face's (the README example's inner eye corner, in the
 * shadow of her blue light, 11 b* warmer than the blue-lit skin around it, came out a brown patch).
 * With no axis, the whole difference.
 */
function acrossAxis(da: number, db: number, u: { ux: number; uy: number } | undefined): readonly [number, number] {
  if (!u) return [da, db];
  const along = da * u.ux + db * u.uy;
  return [da - along * u.ux, db - along * u.uy];
}

/**
 * The 4 channels of the coarse grid `a` (lw × lh cells, each f × f pixels) at pixel (x, y), bilinear
 * between cell centres (clamped at the edges), into `v`.
 */
function sampleGrid(a: Float32Array, lw: number, lh: number, f: number, x: number, y: number, v: Float64Array): void {
  const gy = Math.min(lh - 1, Math.max(0, (y + 0.5) / f - 0.5));
  const y0 = Math.floor(gy);
  const y1 = Math.min(lh - 1, y0 + 1);
  const fy = gy - y0;
  const gx = Math.min(lw - 1, Math.max(0, (x + 0.5) / f - 0.5));
  const x0 = Math.floor(gx);
  const x1 = Math.min(lw - 1, x0 + 1);
  const fx = gx - x0;
  const o00 = (y0 * lw + x0) * 4;
  const o01 = (y0 * lw + x1) * 4;
  const o10 = (y1 * lw + x0) * 4;
  const o11 = (y1 * lw + x1) * 4;
  const w00 = (1 - fx) * (1 - fy);
  const w01 = fx * (1 - fy);
  const w10 = (1 - fx) * fy;
  const w11 = fx * fy;
  for (let c = 0; c < 4; c++) v[c] = a[o00 + c]! * w00 + a[o01 + c]! * w01 + a[o10 + c]! * w10 + a[o11 + c]! * w11;
}
