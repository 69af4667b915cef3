/**
 * The new face's colour matched to the target's skin and light (step 9 of the swap): statistics,
 * lighting surfaces and the chroma low-pass, all fitted on skin only, then the chroma settled so
 * that features and shadows take the target's light as a change of light (settleChroma).
 */
import {
  channelStats,
  chromaBandExcess,
  fromLogLightness,
  fromRelativeChroma,
  localMean,
  settleChroma,
  spreadGains,
  toLogLightness,
  toRelativeChroma,
  transferStats,
  type ColorStats,
} from './color.js';
import { evenEyeWhites } from './eye-whites.js';
import type { Region } from './geometry.js';
import { chosenDegree, heldOutErrors } from './light-order.js';
import { lightAxis, transferLocalChroma } from './light-axis.js';
import { featherMask } from './mask.js';
import { bytes, copyOf, floats } from './scratch.js';
import { transferLighting } from './skin.js';
import type { Point } from './types.js';

/**
 * Highest polynomial degree of the lightness surface (target − source over skin): enough for a side
 * light, too smooth to draw the target's lips, lids or brows into the new face. The degree used is
 * the one that best predicts each part of the skin from the rest (light-order.ts): a cubic where
 * the whole sample shows the light curving, lower where it swings between or beyond its data.
 */
const LIGHT_DEGREE = 3;
/** Polynomial degree of the chroma surface: a light's colour gradient across the face, nothing finer. */
const CHROMA_DEGREE = 2;
/** Smallest robust cut of the lightness surface's fit, in ln(L* + 16): about 3 L* units on skin. */
const LOG_LIGHT_CUT = 0.035;

/** The render's region, where the warp covered it, the face size and the feature zones' margin (px). */
export interface ColourCanvas {
  region: Region;
  covered: Uint8Array;
  size: number;
  margin: number;
}

/** One face's planes: CIELAB, feature zones (1..n), and what its skin model calls non-skin. */
export interface ColourPlanes {
  lab: Float32Array;
  zones: Uint8Array;
  nonSkin: Uint8Array;
  /** The source's lips (1) and their opening (2): settleChroma's `even`. */
  lips?: Uint8Array | undefined;
  /** The face's landmarks in the region's image (the source's: where its eye whites are). */
  lm?: readonly Point[] | undefined;
}

/**
 * The source's colour (src.lab, in place) matched to the target's skin and light. Statistics and
 * lighting over skin only: no feature zone of either face, nothing either skin model calls non-skin
 * (lipstick or eye shadow beyond the landmarks, hair, an occluder). Returns the statistics measured
 * (`given`, video's running average, is used instead when set). `sigmaAB`: scale of the chroma
 * low-pass, as a fraction of the face size.
 */
export function matchColour(
  c: ColourCanvas,
  src: ColourPlanes,
  dst: ColourPlanes,
  mask: { alpha: Float32Array; occluded: Uint8Array | undefined },
  given: ColorStats | undefined,
  tuning: { sigmaAB: number },
): ColorStats {
  const { width: w, height: h } = c.region;
  const n = w * h;
  const skin = floats(n);
  for (let i = 0; i < n; i++) {
    if (dst.zones[i] || src.zones[i] || dst.nonSkin[i] || src.nonSkin[i] || mask.occluded?.[i]) continue;
    skin[i] = mask.alpha[i]!;
  }
  // Lightness in ln(L* + 16) (toLogLightness): a change of light scales it, so the source's texture
  // and highlights keep their contrast as a ratio on a darker or lighter target. Chroma relative
  // to L* + 16 (toRelativeChroma), in the target skin's units: a light scales it the same way.
  // The target in the units the source is matched in (after the surfaces only its chroma is read).
  const dstLight = copyOf(dst.lab);
  toLogLightness(dstLight, c.covered);
  const unit = Math.exp((given?.dst ?? channelStats(dstLight, skin)).mean[0]);
  toRelativeChroma(dstLight, dst.lab, c.covered, unit);
  toRelativeChroma(src.lab, src.lab, c.covered, unit);
  const orig = copyOf(src.lab);
  toLogLightness(src.lab, c.covered);
  const measured: ColorStats = { src: channelStats(src.lab, skin), dst: channelStats(dstLight, skin) };
  const use = given ?? measured;
  transferStats(src.lab, c.covered, use.src, use.dst);
  // Lightness: a smooth surface (the target's broad light, none of its features), of the order the
  // skin's held-out parts support (video: the degree a followed face holds, light-order.ts
  // heldLight). Chroma: first a quadratic surface (a coloured light across the source, which would
  // tint one eye teal), then the local low-pass difference over skin only (a coloured light carries
  // no identity); both only where the target's chroma is measured (unclippedSkin).
  const cuts = [LOG_LIGHT_CUT, 3, 3] as const;
  const errors = heldOutErrors({ src: src.lab, dst: dstLight, weight: skin, channel: 0, w, h, step: 2 }, LIGHT_DEGREE);
  measured.light = { errors, degree: given?.light?.degree ?? chosenDegree(errors, LIGHT_DEGREE) };
  transferLighting(src.lab, dstLight, skin, c.covered, w, h, [measured.light.degree, -1, -1], 2, cuts);
  const tint = unclippedSkin(dst.lab, skin);
  transferLighting(src.lab, dstLight, tint, c.covered, w, h, [-1, CHROMA_DEGREE, CHROMA_DEGREE], 2, cuts);
  fromLogLightness(src.lab, c.covered);
  const inZone = featherMask(src.zones, w, h, Math.max(1, Math.round(c.margin)));
  limitChromaBands(src, dstLight, tint, c, inZone);
  const smooth = copyOf(src.lab);
  const sab = tuning.sigmaAB * c.size;
  const axis = lightAxis(orig, dstLight, skin);
  const local = { use: c.covered, width: w, height: h };
  transferLocalChroma(src.lab, dstLight, tint, local, axis, { across: sab, finest: BAND_FINE * c.size });
  settleChroma(src.lab, c.covered, {
    orig,
    smooth,
    from: use.src,
    gains: spreadGains(use.src, use.dst),
    zone: src.zones,
    inZone,
    skin: localMean(orig, skin, c.covered, w, h, sab),
    even: src.lips ?? bytes(n),
    axis,
  });
  if (src.lm && dst.lm) {
    const eyes = (light: Float32Array, chroma: Float32Array, lm: readonly Point[]) => ({ light, chroma, lm });
    evenEyeWhites(src.lab, eyes(orig, orig, src.lm), eyes(dst.lab, dstLight, dst.lm), c.region);
  }
  fromRelativeChroma(src.lab, c.covered, unit);
  return measured;
}

/**
 * A target pixel this light (L*; paper white is 100) is in the photo's highlight roll-off or
 * clipped: its chroma is the ceiling's, not the light's colour. (By the brightest sRGB channel
 * instead, at 230 it took the lit nose of sample4 face 3, warm and unclipped, out of the fit: its
 * identity 0.443 -> 0.473.)
 */
const NEAR_WHITE = 90;

/**
 * `skin` without the target's near-white pixels: where the target's chroma says something about its
 * light. sample5 face 3's forehead and cheek are blown (L* 92-98, a* and b* near 0 where the skin
 * around is at b* 30); fitted as the target's colour there, the chroma surface pulled the whole
 * upper left of the new face to grey and, past the last skin at the temple, on to blue (b* -15).
 * Without them the surface and the low-pass follow the skin whose colour is measured, and carry
 * it on over the blown part (a face blown all over keeps the statistics' mean shift alone). Held
 * besides to the range it spans over the skin it was fitted on, the surface changed nothing there
 * (b* within 1 unit at 2x).
 */
function unclippedSkin(dstLab: Float32Array, skin: Float32Array): Float32Array {
  const out = copyOf(skin);
  for (let i = 0; i < out.length; i++) if (dstLab[i * 3]! >= NEAR_WHITE) out[i] = 0;
  return out;
}

/**
 * Scales (of the face size) of the chroma band compared: a light's sharp reflection (a nose tip
 * catching a blue lamp), against the skin's broad colour around it.
 */
const BAND_FINE = 0.03;
const BAND_BROAD = 0.2;
/** How far (a* or b* units) the source's band may exceed the target's. */
const BAND_SLACK = 1;

/**
 * The source's mid-scale b* (src.lab, in place, outside the feature zones: `inZone` is 1 inside
 * them, soft at their margin), where it is bluer than the skin's broad colour around it by more
 * than the target's departs from its own there (plus BAND_SLACK), brought back to that much. The source's colour lights
 * are sharper at a nose tip or a cheekbone than the 10 % chroma blur follows: the README example's
 * nose tip stayed a bluish grey (b* 12 against the target's 16). One-sided: the target's own
 * colour is never drawn in (held to the target's band instead, the sheet's median identity went
 * 0.433 -> 0.466), and lightness is left alone (limited the same way, by 3 L units, it took the
 * pale streaks and the highlight down the example's nose, but cost the sheet's median 0.01-0.02).
 */
function limitChromaBands(
  src: ColourPlanes,
  dst: Float32Array,
  skin: Float32Array,
  c: ColourCanvas,
  inZone: Float32Array,
): void {
  const { width: w, height: h } = c.region;
  const use = bytes(w * h);
  for (let i = 0; i < use.length; i++) use[i] = c.covered[i]! && inZone[i]! < 1 ? 1 : 0;
  const scales = { fine: BAND_FINE * c.size, broad: BAND_BROAD * c.size, slack: BAND_SLACK };
  chromaBandExcess(src.lab, dst, skin, use, w, h, scales, (i, _da, db) => {
    // Only a blue excess (db < 0): every other change of the skin's colour here, however small,
    // moved the landmarks found on an open smile's result (read 0.50-0.57 of its gap, 0.65 before).
    if (db < 0) src.lab[i * 3 + 2] = src.lab[i * 3 + 2]! - db * (1 - inZone[i]!);
  });
}
