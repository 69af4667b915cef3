/**
 * Red-eye: a flash straight into the source's eyes lights its pupils red, and the warp carries that
 * red onto every target (each face of the contact sheet had pink pupils). Around each of the
 * source's eye openings (landmarks 36-41, 42-47, where the warp put them; the pupil can sit on a
 * landmark, which do not always enclose it) the patches of red pixels (high a*, red rather than
 * orange in hue) are found, and only a patch that looks like a lit pupil is corrected: compact,
 * lighter than the ring around it (a flash-lit pupil shines out of a darker iris) and much redder
 * than that ring. A warm-lit lid or a brown iris fails all three: a brown iris is dark and its
 * ring as warm as itself, a lid's red is spread along the eye, and a caruncle or a warm lid lies
 * in skin as red as itself. Such a patch's disc (the pupil and its pink rim) is turned dark and
 * neutral as far as it is red.
 */
import { rgbToLab } from './color.js';
import type { Region } from './geometry.js';
import { bytes, ints } from './scratch.js';
import type { Point } from './types.js';

/** Eye openings: upper and lower lid landmarks, in order around each eye. */
const EYES: readonly (readonly [number, number])[] = [
  [36, 42],
  [42, 48],
];
/**
 * A red pixel: a* at least this, and b* at most RED_HUE of it (hue under ~40 degrees: brown irises,
 * lids and skin are orange, b* near or above a*). The sheet source's lit pupils: a* 20-37.
 */
const RED_A = 18;
const RED_HUE = 0.8;
/** A patch smaller than this share of the eye's width squared is noise or a caruncle (the source's pupils: 0.019-0.023). */
const MIN_AREA = 0.01;
/**
 * A pupil is a disc: its pixels' rms distance from their centre over the radius of a disc of their
 * area (a full disc: 0.71; the source's pupils 0.72-0.80; a lid's red band along the eye 1.2 and up).
 */
const MAX_SPREAD = 1;
/** A lit pupil is this much lighter (L*) than its ring (the source: 17-19; brown irises and lids: 9 at most)... */
const LIGHTER = 12;
/** ...and this much redder (a*) than its ring (the source: 13-17; warm-lit eyes: 8 at most). */
const REDDER = 11;
/** Within the pupil's disc the correction ramps from this ratio of red over max(green, blue) (or the skin's)... */
const RIM = 1.05;
/** ...up to this one (the pink rim fades out, the red pupil is corrected fully). */
const RED = 1.3;
/** Search area: the eye's box grown by this share of the eye's width (the pupil can sit on a corner). */
const REACH = 0.2;
/** The disc: this many times the radius of a disc of the patch's area, at most this share of the eye's width. */
const DISC_GROW = 2.2;
const DISC_MAX = 0.3;
/** A corrected pupil keeps this share of its green-blue level: a pupil is dark. */
const PUPIL_DARKEN = 0.55;

/** The search box around one eye, in region coordinates, with its Lab values. */
interface EyeBox {
  x0: number;
  y0: number;
  w: number;
  h: number;
  /** The eye's width (px). */
  width: number;
  lab: Float32Array;
  /** Where the correction starts: RIM, or the box's median red ratio (mostly skin and lids) if higher. */
  rim: number;
}

/** A patch of red pixels: its centre, area and the radius of a disc of that area. */
interface Patch {
  cx: number;
  cy: number;
  n: number;
  r: number;
}

const ratioAt = (rgb: Float32Array, o: number) => rgb[o]! / (Math.max(rgb[o + 1]!, rgb[o + 2]!) + 1);

/**
 * Removes red-eye from `rgb` (region-sized float RGB, in place) around the eyes of `lm` (image
 * coordinates). Returns how many pixels were changed.
 */
export function removeRedEye(rgb: Float32Array, lm: readonly Point[], region: Region): number {
  let changed = 0;
  for (const [from, to] of EYES) {
    const box = eyeBox(rgb, lm.slice(from, to), region);
    if (!box) continue;
    for (const p of redPatches(box)) if (isLitPupil(box, p)) changed += darken(rgb, region, box, p);
  }
  return changed;
}

function eyeBox(rgb: Float32Array, eye: readonly Point[], region: Region): EyeBox | undefined {
  const xs = eye.map((p) => p.x - region.left);
  const ys = eye.map((p) => p.y - region.top);
  const width = Math.max(...xs) - Math.min(...xs);
  const g = REACH * width;
  const x0 = Math.max(0, Math.floor(Math.min(...xs) - g));
  const x1 = Math.min(region.width - 1, Math.ceil(Math.max(...xs) + g));
  const y0 = Math.max(0, Math.floor(Math.min(...ys) - g));
  const y1 = Math.min(region.height - 1, Math.ceil(Math.max(...ys) + g));
  if (x1 < x0 || y1 < y0 || !(width > 0)) return undefined;
  const w = x1 - x0 + 1;
  const h = y1 - y0 + 1;
  const part = new Float32Array(w * h * 3);
  for (let y = 0; y < h; y++) {
    const o = ((y0 + y) * region.width + x0) * 3;
    part.set(rgb.subarray(o, o + w * 3), y * w * 3);
  }
  const ratios = new Float32Array(w * h);
  for (let i = 0; i < w * h; i++) ratios[i] = ratioAt(part, i * 3);
  const rim = Math.max(RIM, ratios.sort()[(w * h) >> 1]!);
  return { x0, y0, w, h, width, lab: rgbToLab(part), rim };
}

const isRed = (lab: Float32Array, i: number) =>
  lab[i * 3 + 1]! >= RED_A && lab[i * 3 + 2]! <= RED_HUE * lab[i * 3 + 1]!;

/** The box's 8-connected patches of red pixels of at least MIN_AREA. */
function redPatches(b: EyeBox): Patch[] {
  const seen = bytes(b.w * b.h);
  const stack = ints(b.w * b.h);
  const out: Patch[] = [];
  for (let s = 0; s < b.w * b.h; s++) {
    if (seen[s] || !isRed(b.lab, s)) continue;
    let top = 0;
    let n = 0;
    let sx = 0;
    let sy = 0;
    stack[top++] = s;
    seen[s] = 1;
    while (top > 0) {
      const i = stack[--top]!;
      const x = i % b.w;
      const y = (i - x) / b.w;
      n++;
      sx += x;
      sy += y;
      for (let dy = -1; dy <= 1; dy++) {
        for (let dx = -1; dx <= 1; dx++) {
          const nx = x + dx;
          const ny = y + dy;
          const j = ny * b.w + nx;
          if (nx < 0 || ny < 0 || nx >= b.w || ny >= b.h || seen[j] || !isRed(b.lab, j)) continue;
          seen[j] = 1;
          stack[top++] = j;
        }
      }
    }
    if (n >= MIN_AREA * b.width * b.width) out.push({ cx: sx / n, cy: sy / n, n, r: Math.sqrt(n / Math.PI) });
  }
  return out;
}

/**
 * Whether patch `p` is a flash-lit pupil: compact, and lighter and redder than the ring around it
 * (from just outside a disc of its area to twice that, the iris and whatever lies beyond).
 */
function isLitPupil(b: EyeBox, p: Patch): boolean {
  let m = 0;
  let spread = 0;
  let inL = 0;
  let inA = 0;
  let ringN = 0;
  let ringL = 0;
  let ringA = 0;
  for (let y = 0; y < b.h; y++) {
    for (let x = 0; x < b.w; x++) {
      const i = y * b.w + x;
      const d = Math.hypot(x - p.cx, y - p.cy);
      if (isRed(b.lab, i) && d <= 3 * p.r) {
        m++;
        spread += d * d;
        inL += b.lab[i * 3]!;
        inA += b.lab[i * 3 + 1]!;
      } else if (d > p.r + 1 && d <= 2 * p.r + 2) {
        ringN++;
        ringL += b.lab[i * 3]!;
        ringA += b.lab[i * 3 + 1]!;
      }
    }
  }
  if (ringN === 0) return false;
  // All red near the patch counts: red lying around a small patch is a red band, not a pupil.
  return (
    Math.sqrt(spread / m) <= MAX_SPREAD * Math.sqrt(m / Math.PI) &&
    inL / m - ringL / ringN >= LIGHTER &&
    inA / m - ringA / ringN >= REDDER
  );
}

/** Turns patch `p`'s disc dark and neutral as far as it is red. Returns how many pixels changed. */
function darken(rgb: Float32Array, region: Region, b: EyeBox, p: Patch): number {
  const cx = b.x0 + p.cx;
  const cy = b.y0 + p.cy;
  const r = Math.min(DISC_MAX * b.width, DISC_GROW * p.r);
  let changed = 0;
  for (let y = Math.max(0, Math.floor(cy - r - 1)); y <= Math.min(region.height - 1, cy + r + 1); y++) {
    for (let x = Math.max(0, Math.floor(cx - r - 1)); x <= Math.min(region.width - 1, cx + r + 1); x++) {
      const edge = Math.min(1, Math.max(0, r + 1 - Math.hypot(x - cx, y - cy)));
      const o = (y * region.width + x) * 3;
      const t = edge * Math.min(1, Math.max(0, (ratioAt(rgb, o) - b.rim) / (RED - b.rim)));
      if (t <= 0) continue;
      // Towards a neutral grey at the green-blue level, darkened: a pupil, not a red one.
      const grey = PUPIL_DARKEN * Math.min(rgb[o + 1]!, rgb[o + 2]!);
      for (let c = 0; c < 3; c++) rgb[o + c] = rgb[o + c]! + t * (grey - rgb[o + c]!);
      changed++;
    }
  }
  return changed;
}
