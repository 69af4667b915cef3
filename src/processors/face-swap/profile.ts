/**
 * Faces turned too far to swap. A 2-D warp of a frontal face cannot fill a full profile: swapped,
 * sample2's profile came out smeared, with a second eye painted onto the background. The 68-point
 * net was trained on faces that show both eyes, so on a profile it still places them, and from some
 * crops (Tiny's box at min_confidence 0.3) its landmarks look like a three-quarter face's.
 */
import { JobError } from '../../errors.js';
import { landmarkCrop, detectLandmarks } from './detect.js';
import { extents, noseAcross } from './geometry.js';
import type { Point, RgbImage } from './types.js';

/** noseAcross nearer an edge than this: a profile (0.06 on sample2's from SSD's box). */
export const PROFILE_EDGE = 0.12;

/**
 * The second look: the landmark net run again on the face's crop moved this share of its width away
 * from the nose, so it sees more of the side of the head the face is turned from.
 */
export const PROFILE_SHIFT = 0.1;

/**
 * Eye distance over jaw width (eyesOverJaw) on that moved crop under this: a profile. On the 29
 * faces measured (the contact sheet's 24 faces >= 100 px with the rolled ones, the tests' five
 * portraits) 0.381-0.477, the most turned three-quarter faces lowest (sample5's face 1, 0.381);
 * sample2's profile 0.282 from Tiny's box, 0.262 from SSD's. Its nose, meanwhile, reads 0.26 of the
 * jaw from Tiny's box (refined), inside PROFILE_EDGE's range, which is why one look was not enough.
 * The net squeezes a profile's eyes together (the far one is hidden) while the jaw keeps its span.
 */
export const PROFILE_EYES_OVER_JAW = 0.33;

function centre(lm: readonly Point[], from: number, to: number): Point {
  let x = 0;
  let y = 0;
  for (let i = from; i < to; i++) {
    x += lm[i]!.x;
    y += lm[i]!.y;
  }
  return { x: x / (to - from), y: y / (to - from) };
}

/** Distance between the eye centres (36-41, 42-47) over the jaw line's span (0 to 16). */
export function eyesOverJaw(lm: readonly Point[]): number {
  const l = centre(lm, 36, 42);
  const r = centre(lm, 42, 48);
  return Math.hypot(r.x - l.x, r.y - l.y) / Math.hypot(lm[16]!.x - lm[0]!.x, lm[16]!.y - lm[0]!.y);
}

/**
 * Whether the face with (refined) landmarks `lm` in `img` is a profile: its nose at an end of the
 * jaw, or, with the crop moved away from the nose (one more landmark pass, ~10 ms), its eyes
 * squeezed together.
 */
export async function isProfile(img: RgbImage, lm: readonly Point[]): Promise<boolean> {
  const t = noseAcross(lm);
  if (!(t >= PROFILE_EDGE && t <= 1 - PROFILE_EDGE)) return true;
  const away = t < 0.5 ? PROFILE_SHIFT : -PROFILE_SHIFT;
  return eyesOverJaw(await detectLandmarks(img, landmarkCrop(lm, away))) < PROFILE_EYES_OVER_JAW;
}

/** The job's error for a profile face with landmarks `lm` (of `label`, e.g. input.target). */
export function profileError(lm: readonly Point[], label: string): JobError {
  const { x0, y0 } = extents(lm);
  return new JobError(
    'invalid_media',
    `${label}: the face at x ${Math.round(x0)}, y ${Math.round(y0)} is in profile; ` +
      'the swap needs a face turned less (both eyes and cheeks showing)',
  );
}

/** Fails the job, naming the face, when it is a profile. */
export async function refuseProfile(img: RgbImage, lm: readonly Point[], label: string): Promise<void> {
  if (await isProfile(img, lm)) throw profileError(lm, label);
}

/**
 * The target faces to swap: every one, or the job fails naming the first profile; with faces "all"
 * (`leaveProfiles`) profiles are left as they are instead, unless every face is one.
 */
export async function swappableTargets(
  img: RgbImage,
  targets: readonly Point[][],
  leaveProfiles: boolean,
): Promise<Point[][]> {
  const profiles: Point[][] = [];
  for (const lm of targets) if (await isProfile(img, lm)) profiles.push(lm);
  const rest = targets.filter((lm) => !profiles.includes(lm));
  if (profiles.length === 0 || (leaveProfiles && rest.length > 0)) return rest;
  throw profileError(profiles[0]!, 'input.target');
}
