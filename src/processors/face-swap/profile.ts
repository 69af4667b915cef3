/**
 * Faces turned too far to swap. A 2-D warp of a frontal face cannot fill a full profile: swapped,
 * sample2's profile came out smeared, with a second eye painted onto the background. The 68-point
 * net was trained on faces that show both eyes, so on a profile it still places the far one, off
 * the face, and from some crops (Tiny's box at min_confidence 0.3) its landmarks otherwise look like
 * a three-quarter face's: its nose reads 0.26 of the way along the jaw, inside PROFILE_EDGE.
 */
import { JobError } from '../../errors.js';
import { extents, noseAcross } from './geometry.js';
import type { Point, RgbImage } from './types.js';

/** noseAcross nearer an end of the jaw than this: a profile (0.06 on sample2's from SSD's box). */
export const PROFILE_EDGE = 0.12;

/**
 * noseAcross nearer an end than this: the face is turned, and a far eye without texture (FLAT_EYE)
 * makes it a profile. Sample2's profile reads 0.06-0.27 from every box tried (Tiny's and SSD's, the
 * photo at 0.5-1.5x, mirrored, cropped); a frontal face with one eye hidden is not turned.
 */
export const TURNED_EDGE = 0.35;

/**
 * The far eye's patch (the side the nose points to) with a luminance spread under this share of
 * the near eye's: no eye there, the net put it on the background. Sample2's profile 0.00-0.08 over
 * those variants; of the 24 other faces of the six sample photos, the three rolled ones, all of them
 * mirrored and the tests' five portraits, the turned ones 0.54 and up (sample4's third face rolled
 * 25°), the others 0.36 and up (sample2's face looking down, its far eye in shadow).
 */
export const FLAT_EYE = 0.2;

/** Standard deviation of luminance in the box of landmarks `from..from+6` (one eye) grown by a quarter of its width. */
export function eyeTexture(img: RgbImage, lm: readonly Point[], from: number): number {
  const { x0, y0, x1, y1 } = extents(lm.slice(from, from + 6));
  const g = 0.25 * (x1 - x0);
  const left = Math.max(0, Math.floor(x0 - g));
  const right = Math.min(img.width, Math.ceil(x1 + g));
  const top = Math.max(0, Math.floor(y0 - g));
  const bottom = Math.min(img.height, Math.ceil(y1 + g));
  let n = 0;
  let s = 0;
  let s2 = 0;
  for (let y = top; y < bottom; y++) {
    for (let o = (y * img.width + left) * 3, end = (y * img.width + right) * 3; o < end; o += 3) {
      const l = 0.299 * img.data[o]! + 0.587 * img.data[o + 1]! + 0.114 * img.data[o + 2]!;
      n++;
      s += l;
      s2 += l * l;
    }
  }
  if (n === 0) return 0;
  const mean = s / n;
  return Math.sqrt(Math.max(0, s2 / n - mean * mean));
}

/**
 * Whether the face with (refined) landmarks `lm` in `img` is a profile: its nose at an end of the
 * jaw, or turned and its far eye (nose side: landmarks 36-41 when the nose points left) flat.
 */
export function isProfile(img: RgbImage, lm: readonly Point[]): boolean {
  const t = noseAcross(lm);
  const edge = Math.min(t, 1 - t);
  if (!(edge >= PROFILE_EDGE)) return true;
  if (edge >= TURNED_EDGE) return false;
  const [far, near] = t < 0.5 ? [36, 42] : [42, 36];
  return eyeTexture(img, lm, far) < FLAT_EYE * eyeTexture(img, lm, near);
}

/**
 * Why the swap refuses a face, as face-detect's `reason` says it: `profile` (isProfile). A code, so a
 * client can act on it; more may come, and a client shows one it does not know as it is.
 */
export type Refusal = 'profile';

/**
 * Whether the swap can take the face with (refined) landmarks `lm` in `img`, as face-detect answers
 * it: the swap's own rule (isProfile), so the two never disagree on the same landmarks.
 */
export function swappability(
  img: RgbImage,
  lm: readonly Point[],
): { swappable: true } | { swappable: false; reason: Refusal } {
  return isProfile(img, lm) ? { swappable: false, reason: 'profile' } : { swappable: true };
}

/**
 * The job's error for a profile face with landmarks `lm` (of `label`, e.g. input.target), naming it by
 * its index (face-detect's left-to-right order) when the job picked it by index.
 */
export function profileError(lm: readonly Point[], label: string, index?: number): JobError {
  const { x0, y0 } = extents(lm);
  const at = `at x ${Math.round(x0)}, y ${Math.round(y0)}`;
  return new JobError(
    'invalid_media',
    `${label}: ${index === undefined ? `the face ${at}` : `face ${index} (${at})`} is in profile; ` +
      'the swap needs a face turned less (both eyes and cheeks showing)',
  );
}

/** Fails the job, naming the face, when it is a profile. */
export function refuseProfile(img: RgbImage, lm: readonly Point[], label: string, index?: number): void {
  if (isProfile(img, lm)) throw profileError(lm, label, index);
}

/**
 * The target faces to swap: every one, or the job fails naming the first profile (by its index in
 * `indices` when the job picked faces by index); with faces "all" (`leaveProfiles`) profiles are left
 * as they are instead, unless every face is one.
 */
export function swappableTargets(
  img: RgbImage,
  targets: readonly Point[][],
  leaveProfiles: boolean,
  indices?: readonly number[],
): Point[][] {
  const profile = targets.map((lm) => isProfile(img, lm));
  const rest = targets.filter((_, i) => !profile[i]);
  const first = profile.indexOf(true);
  if (first < 0 || (leaveProfiles && rest.length > 0)) return rest;
  throw profileError(targets[first]!, 'input.target', indices?.[first]);
}
