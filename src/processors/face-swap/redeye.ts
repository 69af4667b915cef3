/**
 * Red-eye: a flash straight into the source's eyes lights its pupils red, and the warp carries that
 * red onto every target (each face of the contact sheet had pink pupils). Around each of the
 * source's eye openings (landmarks 36-41, 42-47, where the warp put them) the red pixels are found;
 * the disc they make (the pupil and its pink rim, which the landmarks do not always enclose) is
 * turned dark and neutral as far as it is red. Whites, iris and lids are not red in that way.
 */
import type { Region } from './geometry.js';
import type { Point } from './types.js';

/** Eye openings: upper and lower lid landmarks, in order around each eye. */
const EYES: readonly (readonly [number, number])[] = [
  [36, 42],
  [42, 48],
];
/** Red over max(green, blue) that marks a red pupil (the sheet source's lids reach about 1.2)... */
const RED = 1.3;
/** ...and at least this much above the median ratio around the eye. */
const RED_OVER_SKIN = 0.1;
/** At most this share of the search box may be red for it to be a pupil. */
const MAX_SHARE = 0.15;
/** Within the pupil's disc the correction ramps from this ratio (its pink rim; at least the skin's) up to the red one. */
const RIM = 1.05;
/** Search area: the eye's box grown by this share of the eye's width (the pupil can sit on a corner). */
const REACH = 0.2;
/** The disc: this many times the radius of a disc of the red pixels' area, at most this share of the eye's width. */
const DISC_GROW = 1.5;
const DISC_MAX = 0.3;
/** A corrected pupil keeps this share of its green-blue level: a pupil is dark. */
const PUPIL_DARKEN = 0.55;

const ratioAt = (rgb: Float32Array, o: number) => rgb[o]! / (Math.max(rgb[o + 1]!, rgb[o + 2]!) + 1);

/**
 * Removes red-eye from `rgb` (region-sized float RGB, in place) around the eyes of `lm` (image
 * coordinates). Returns how many pixels were changed.
 */
export function removeRedEye(rgb: Float32Array, lm: readonly Point[], region: Region): number {
  let changed = 0;
  for (const [from, to] of EYES) changed += fixEye(rgb, lm.slice(from, to), region);
  return changed;
}

function fixEye(rgb: Float32Array, eye: readonly Point[], region: Region): number {
  const xs = eye.map((p) => p.x - region.left);
  const ys = eye.map((p) => p.y - region.top);
  const width = Math.max(...xs) - Math.min(...xs);
  const g = REACH * width;
  const x0 = Math.max(0, Math.floor(Math.min(...xs) - g));
  const x1 = Math.min(region.width - 1, Math.ceil(Math.max(...xs) + g));
  const y0 = Math.max(0, Math.floor(Math.min(...ys) - g));
  const y1 = Math.min(region.height - 1, Math.ceil(Math.max(...ys) + g));
  // Red as against this face's own skin and lids around the eye (a face under a warm or pink light
  // has skin as red as the contact sheet's pupils): the box's median ratio is mostly theirs.
  const ratios: number[] = [];
  for (let y = y0; y <= y1; y++) for (let x = x0; x <= x1; x++) ratios.push(ratioAt(rgb, (y * region.width + x) * 3));
  ratios.sort((a, b) => a - b);
  const skin = ratios[ratios.length >> 1] ?? 1;
  const red = Math.max(RED, skin + RED_OVER_SKIN);
  const rim = Math.max(RIM, skin);
  let n = 0;
  let cx = 0;
  let cy = 0;
  for (let y = y0; y <= y1; y++) {
    for (let x = x0; x <= x1; x++) {
      if (ratioAt(rgb, (y * region.width + x) * 3) < red) continue;
      n++;
      cx += x;
      cy += y;
    }
  }
  // A pupil is a small part of the box; more red than that is a red light or make-up, not red-eye.
  if (n < 3 || n > MAX_SHARE * ratios.length) return 0;
  cx /= n;
  cy /= n;
  const r = Math.min(DISC_MAX * width, DISC_GROW * Math.sqrt(n / Math.PI));
  let changed = 0;
  for (let y = Math.max(0, Math.floor(cy - r - 1)); y <= Math.min(region.height - 1, cy + r + 1); y++) {
    for (let x = Math.max(0, Math.floor(cx - r - 1)); x <= Math.min(region.width - 1, cx + r + 1); x++) {
      const edge = Math.min(1, Math.max(0, r + 1 - Math.hypot(x - cx, y - cy)));
      const o = (y * region.width + x) * 3;
      const t = edge * Math.min(1, Math.max(0, (ratioAt(rgb, o) - rim) / (red - rim)));
      if (t <= 0) continue;
      // Towards a neutral grey at the green-blue level, darkened: a pupil, not a red one.
      const grey = PUPIL_DARKEN * Math.min(rgb[o + 1]!, rgb[o + 2]!);
      for (let c = 0; c < 3; c++) rgb[o + c] = rgb[o + c]! + t * (grey - rgb[o + c]!);
      changed++;
    }
  }
  return changed;
}
