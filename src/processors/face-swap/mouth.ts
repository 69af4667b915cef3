/**
 * The target's open mouth: its inside (teeth, tongue, the dark of the throat) is the target's
 * expression and stays in the result; the source's lips are warped onto the target's lip bands only.
 */
import type { Region } from './geometry.js';
import { featherMask, rasterizePolygon } from './mask.js';
import type { Point } from './types.js';

/** Inner lip contour, 60-67 (68-point iBUG layout). */
const INNER_LIP = [60, 61, 62, 63, 64, 65, 66, 67] as const;
/** Upper and lower inner-lip points facing each other across the opening. */
const GAP_PAIRS = [
  [61, 67],
  [62, 66],
  [63, 65],
] as const;
/**
 * Mean gap between the inner lips (of the face size) from which the mouth counts as open. The
 * 68-point net puts closed lips up to 3% apart (0.5-2.8% on the sample photos' closed mouths) and
 * most smiles showing teeth 4-13% apart.
 */
export const OPEN_GAP = 0.03;
/** Width of the hole's soft edge (of the face size), outwards from the inner lip contour. */
const EDGE = 0.01;

/** Mean distance between the upper and lower inner lip, as a fraction of `size`. */
export function mouthGap(lm: readonly Point[], size: number): number {
  let s = 0;
  for (const [a, b] of GAP_PAIRS) s += Math.hypot(lm[a]!.x - lm[b]!.x, lm[a]!.y - lm[b]!.y);
  return s / GAP_PAIRS.length / size;
}

/**
 * 1 inside the target's inner lip contour and over `opening` (the opening the pixels show, region-
 * sized: opening.ts), ramping to 0 just outside them, over `region`; undefined when the mouth is
 * closed. The caller multiplies the face's alpha by (1 - hole).
 */
export function innerMouthHole(
  lm: readonly Point[],
  region: Region,
  size: number,
  opening?: Uint8Array,
): Float32Array | undefined {
  if (mouthGap(lm, size) < OPEN_GAP) return undefined;
  const inside = rasterizePolygon(
    INNER_LIP.map((i) => lm[i]!),
    region,
  );
  if (opening) for (let i = 0; i < inside.length; i++) inside[i] = inside[i]! | opening[i]!;
  const r = Math.max(1, Math.round(EDGE * size));
  const soft = featherMask(inside, region.width, region.height, r);
  for (let i = 0; i < soft.length; i++) soft[i] = inside[i] ? 1 : Math.min(1, 2 * soft[i]!);
  return soft;
}
