/**
 * Faces the swap refuses: too small for their landmarks to be read, or turned too far (a 2-D warp of
 * a frontal face cannot fill a full profile: swapped, sample2's profile came out smeared, with a
 * second eye painted onto the background). The 68-point net was trained on faces that show both
 * eyes, so on a profile it still places the far one, off the face, and from some crops (Tiny's box
 * at min_confidence 0.3) its landmarks otherwise look like a three-quarter face's: its nose reads
 * 0.26 of the way along the jaw, inside PROFILE_EDGE.
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
 * Narrowest face (its landmarks' extent, px) the swap takes. Below it the landmark net, refining on a
 * crop of a few dozen pixels, collapses: on face-api's sample photos shrunk to 240 px wide (faces
 * 19-24 px) the refined landmarks of 3 of 20 faces spanned 8-12 px or put the nose outside the jaw
 * (a frontal face then read as a profile); at 320 px wide (24-41 px) one did (28 px). Such a face
 * swapped comes out a smear, and one of this size shows little of anyone.
 */
export const MIN_FACE_WIDTH = 32;

/**
 * Why the swap refuses a face, as face-detect's `reason` says it: `small` (under MIN_FACE_WIDTH) or
 * `profile` (isProfile). Codes, so a client can act on them; more may come.
 */
export type Refusal = 'small' | 'profile';

/** The face's width: its landmarks' extent across. */
const faceWidth = (lm: readonly Point[]) => {
  const { x0, x1 } = extents(lm);
  return x1 - x0;
};

/**
 * THE rule of which faces the swap refuses, for the swap and face-detect alike (so they never
 * disagree on the same landmarks): the face with (refined) landmarks `lm` in `img` is too small, or
 * a profile (whose landmarks are not read on a face too small for them), or undefined: swappable.
 */
export function refusalOf(img: RgbImage, lm: readonly Point[]): Refusal | undefined {
  if (faceWidth(lm) < MIN_FACE_WIDTH) return 'small';
  return isProfile(img, lm) ? 'profile' : undefined;
}

/** face-detect's verdict on a face: refusalOf as `swappable`, and `reason` only when it is false. */
export function swappability(
  img: RgbImage,
  lm: readonly Point[],
): { swappable: true } | { swappable: false; reason: Refusal } {
  const reason = refusalOf(img, lm);
  return reason ? { swappable: false, reason } : { swappable: true };
}

/**
 * The job's error for a face refused for `reason`, with landmarks `lm` (of `label`, e.g.
 * input.target), naming it by its index (face-detect's left-to-right order) when the job picked it by
 * index.
 */
export function refusalError(reason: Refusal, lm: readonly Point[], label: string, index?: number): JobError {
  const { x0, y0 } = extents(lm);
  const at = `at x ${Math.round(x0)}, y ${Math.round(y0)}`;
  const face = `${label}: ${index === undefined ? `the face ${at}` : `face ${index} (${at})`}`;
  return new JobError(
    'invalid_media',
    reason === 'small'
      ? `${face} is too small to swap (the swap needs a face at least ${MIN_FACE_WIDTH} px across)`
      : `${face} is in profile; the swap needs a face turned less (both eyes and cheeks showing)`,
  );
}

/** Fails the job, naming the face, when the swap refuses it (refusalOf). */
export function refuseFace(img: RgbImage, lm: readonly Point[], label: string, index?: number): void {
  const reason = refusalOf(img, lm);
  if (reason) throw refusalError(reason, lm, label, index);
}

/**
 * The target faces to swap: every one, or the job fails naming the first refused one (by its index
 * in `indices` when the job picked faces by index); with faces "all" (`leaveRefused`) refused faces
 * are left as they are instead, unless every face is one.
 */
export function swappableTargets(
  img: RgbImage,
  targets: readonly Point[][],
  leaveRefused: boolean,
  indices?: readonly number[],
): Point[][] {
  const refused = targets.map((lm) => refusalOf(img, lm));
  const rest = targets.filter((_, i) => !refused[i]);
  const first = refused.findIndex((r) => r !== undefined);
  if (first < 0 || (leaveRefused && rest.length > 0)) return rest;
  throw refusalError(refused[first]!, targets[first]!, 'input.target', indices?.[first]);
}
