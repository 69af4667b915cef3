/**
 * Faces the swap refuses: too small for their landmarks to be read, or turned too far (a 2-D warp of
 * a frontal face cannot fill a full profile: swapped, sample2's profile came out smeared, with a
 * second eye painted onto the background). The 68-point net was trained on faces that show both
 * eyes, so on a profile it still places the far one, off the face, and from some crops (Tiny's box
 * at min_confidence 0.3) its landmarks otherwise look like a three-quarter face's: its nose reads
 * 0.26 of the way along the jaw, inside PROFILE_EDGE.
 */
import { JobError } from '../../errors.js';
import { extents, inPolygon, noseAcross } from './geometry.js';
import { kthSmallest } from './select.js';
import type { Box, Point, RgbImage } from './types.js';

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

/** Why the swap refuses a face as its source (sourceRefusalOf): a target's reasons, or `eyes`. */
export type SourceRefusal = Refusal | 'eyes';

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

/**
 * A source's eyes must show: the brighter tenth of each eye opening (landmarks 36-41, 42-47) at
 * least this share of the median around it (the eye's box grown by half its width: lids, lashes,
 * the brow's foot, cheek), i.e. a white or a glint. A squint or a lowered lid in shadow is dark
 * throughout, yet the net still draws an open eye on it, and the warp stretches that dark slit over
 * the target's open eye: smeared, black-holed eyes. Of the six sample photos' faces, sample4's third
 * (eyes lowered) reads 0.62, sample5's first (one eye in shadow) 0.60 and fourth (narrowed) 0.68,
 * all three swapping to such eyes; every other face 0.78 and up (the README example's source 0.87,
 * the contact sheet's 1.01). Read again at half size and mirrored: the same three 0.53-0.76, the
 * others 0.74 and up, so near the line a photo can fall either side.
 */
export const DARK_EYES = 0.72;

const quantile = (v: number[], q: number) =>
  v.length === 0 ? 0 : kthSmallest(Float64Array.from(v), Math.floor(q * (v.length - 1)));

/**
 * The brighter tenth of the eye opening `from..from+6` over the median of its surroundings
 * (DARK_EYES), read in the eye's own frame (its corners level), so a rolled face reads as upright.
 */
export function eyeShows(img: RgbImage, lm: readonly Point[], from: number): number {
  const a = lm[from]!;
  const b = lm[from + 3]!;
  const len = Math.max(1e-6, Math.hypot(b.x - a.x, b.y - a.y));
  const [cos, sin] = [(b.x - a.x) / len, (b.y - a.y) / len];
  // The eye in its frame: u along the corners from `a`, v across.
  const eye = lm.slice(from, from + 6).map((p) => ({
    x: (p.x - a.x) * cos + (p.y - a.y) * sin,
    y: -(p.x - a.x) * sin + (p.y - a.y) * cos,
  }));
  const { x0, y0, x1, y1 } = extents(eye);
  const g = 0.5 * (x1 - x0);
  const opening: number[] = [];
  const around: number[] = [];
  for (let v = Math.floor(y0 - g); v <= y1 + g; v++) {
    for (let u = Math.floor(x0 - g / 4); u <= x1 + g / 4; u++) {
      const x = Math.round(a.x + (u + 0.5) * cos - (v + 0.5) * sin - 0.5);
      const y = Math.round(a.y + (u + 0.5) * sin + (v + 0.5) * cos - 0.5);
      if (x < 0 || y < 0 || x >= img.width || y >= img.height) continue;
      const o = (y * img.width + x) * 3;
      const l = 0.299 * img.data[o]! + 0.587 * img.data[o + 1]! + 0.114 * img.data[o + 2]!;
      (inPolygon(u + 0.5, v + 0.5, eye) ? opening : around).push(l);
    }
  }
  if (opening.length === 0) return 0;
  return quantile(opening, 0.9) / Math.max(1, quantile(around, 0.5));
}

/** Whether both of a face's eyes show (DARK_EYES): what a source must have. */
export function eyesShow(img: RgbImage, lm: readonly Point[]): boolean {
  return Math.min(eyeShows(img, lm, 36), eyeShows(img, lm, 42)) >= DARK_EYES;
}

/**
 * THE rule of which faces the swap refuses as its SOURCE (the swap and face-detect alike): those it
 * refuses as a target (refusalOf), and `eyes` when its eyes do not show (eyesShow). A target's
 * narrowed or shadowed eyes are its own expression and stay; a source's are stretched over the
 * target's eyes, so a source needs them open and lit.
 */
export function sourceRefusalOf(
  img: RgbImage,
  lm: readonly Point[],
  asTarget: Refusal | undefined = refusalOf(img, lm),
): SourceRefusal | undefined {
  return asTarget ?? (eyesShow(img, lm) ? undefined : 'eyes');
}

/**
 * face-detect's verdict on a face: refusalOf as `swappable` (with `reason` only when false), and
 * sourceRefusalOf as `usable_as_source` (with `source_reason` only when false).
 */
export function swappability(img: RgbImage, lm: readonly Point[]): Swappability {
  const reason = refusalOf(img, lm);
  const asTarget = reason ? { swappable: false as const, reason } : { swappable: true as const };
  const sourceReason = sourceRefusalOf(img, lm, reason);
  return sourceReason
    ? { ...asTarget, usable_as_source: false, source_reason: sourceReason }
    : { ...asTarget, usable_as_source: true };
}

/** face-detect's flags of one face (swappability). */
export type Swappability = ({ swappable: true } | { swappable: false; reason: Refusal }) &
  ({ usable_as_source: true } | { usable_as_source: false; source_reason: SourceRefusal });

/**
 * The job's error for a face refused for `reason`, named by the top-left corner of its detector box
 * `box` (the box face-detect reports for it, so a user can find it there) and by its index
 * (face-detect's left-to-right order) when the job picked it by index. `label`: e.g. input.target.
 */
export function refusalError(reason: SourceRefusal, box: Box, label: string, index?: number): JobError {
  const at = `at x ${Math.round(box.x)}, y ${Math.round(box.y)}`;
  const face = `${label}: ${index === undefined ? `the face ${at}` : `face ${index} (${at})`}`;
  const why = {
    small: `is too small to swap (the swap needs a face at least ${MIN_FACE_WIDTH} px across)`,
    profile: 'is in profile; the swap needs a face turned less (both eyes and cheeks showing)',
    eyes:
      'does not show its eyes (closed, lowered, squinting or in shadow); use a source photo facing the ' +
      'camera with both eyes open and lit',
  }[reason];
  return new JobError('invalid_media', `${face} ${why}`);
}

/** A face the swap works on: its (refined) landmarks and the detector box it was found in. */
export interface FoundFace {
  lm: Point[];
  box: Box;
}

/** Fails the job, naming the face (by `index` when picked by one), when the swap refuses it as its source. */
export function refuseSource(img: RgbImage, face: FoundFace, index?: number): void {
  const reason = sourceRefusalOf(img, face.lm);
  if (reason) throw refusalError(reason, face.box, 'input.source', index);
}

/**
 * The target faces to swap: every one, or the job fails naming the first refused one (by its index
 * in `indices` when the job picked faces by index); with faces "all" (`leaveRefused`) refused faces
 * are left as they are instead, unless every face is one.
 */
export function swappableTargets(
  img: RgbImage,
  targets: readonly FoundFace[],
  leaveRefused: boolean,
  indices?: readonly number[],
): FoundFace[] {
  const refused = targets.map((f) => refusalOf(img, f.lm));
  const rest = targets.filter((_, i) => !refused[i]);
  const first = refused.findIndex((r) => r !== undefined);
  if (first < 0 || (leaveRefused && rest.length > 0)) return rest;
  throw refusalError(refused[first]!, targets[first]!.box, 'input.target', indices?.[first]);
}
