/**
 * The contact sheet's faces and measures, shared by the sheet (bench/face-swap-sheet.ts), its test
 * (sheet-identity.test.ts) and the ablation (bench/face-swap-ablation.ts): every face of at least
 * SHEET_MIN_FACE px of each sheet target, left to right (as a user picks them by index), the source's
 * descriptor, and how far a result's landmarks are from the target's.
 */
import {
  computeDescriptor,
  detectLandmarks,
  findFaces,
  largestFaceLandmarks,
  leftToRight,
  refineLandmarks,
} from '../../src/processors/face-swap/detect.js';
import type { createFaceSwapJobType } from '../../src/processors/face-swap/index.js';
import { decodeImage } from '../../src/processors/face-swap/image.js';
import { levelled } from '../../src/processors/face-swap/level.js';
import { DEFAULT_TUNING, extendForehead } from '../../src/processors/face-swap/swap.js';
import type { Box, Point, RgbImage } from '../../src/processors/face-swap/types.js';
import { runContext, sample, sheetSource, sheetTargets } from './fixtures.js';

/** Faces smaller than this (px, the box's larger side) are left out of the sheet. */
export const SHEET_MIN_FACE = 100;
/** A face this near the source before the swap is the source's own (sample6's), swapped onto itself. */
export const SELF_BEFORE = 0.3;

export const decodeSheetImage = (bytes: Uint8Array) => decodeImage(bytes, 'sheet', 1e8);

/**
 * The sheet's source (or `source`) swapped into face `index` of sample `n` by the job (as a user
 * picks it), with the target decoded and its landmarks there.
 */
export async function sheetSwap(
  jt: ReturnType<typeof createFaceSwapJobType>,
  n: 1 | 2 | 3 | 4 | 5 | 6,
  index: number,
  source?: Buffer,
) {
  const target = await decodeSheetImage(sample(n));
  const face = leftToRight(await findFaces(target, 0.5))[index]!;
  const run = runContext(
    { source: source ?? (await sheetSource()), target: sample(n) },
    { format: 'png', target_face_indices: [index] },
  );
  const result = await decodeSheetImage((await jt.run(run.ctx)).bytes);
  return { target, result, lm: await detectLandmarks(target, face.box) };
}

export interface SheetFace {
  target: { name: string; bytes: Buffer; confidence: number };
  /** The target decoded. */
  image: RgbImage;
  /** Its index left to right (the job's target_face_indices). */
  index: number;
  /** As findFaces gives it (box, score). */
  face: Awaited<ReturnType<typeof findFaces>>[number];
  name: string;
}

/** The sheet's faces, target by target (`only`: the targets to keep, by name). */
export async function* sheetFaces(only?: (name: string) => boolean): AsyncGenerator<SheetFace> {
  for (const target of await sheetTargets()) {
    if (only && !only(target.name)) continue;
    const image = await decodeSheetImage(target.bytes);
    for (const [index, face] of leftToRight(await findFaces(image, target.confidence)).entries()) {
      if (Math.max(face.box.width, face.box.height) < SHEET_MIN_FACE) continue;
      yield { target, image, index, face, name: `${target.name} face ${index}` };
    }
  }
}

/**
 * The source photo (the sheet's, or `photo`), decoded, its face's landmarks and descriptor (what
 * identity is measured against).
 */
export async function sheetSourceFace(photo?: Buffer) {
  const bytes = photo ?? (await sheetSource());
  const image = await decodeSheetImage(bytes);
  const lm = await largestFaceLandmarks(image, await findFaces(image, 0.5));
  return { bytes, image, lm, descriptor: await computeDescriptor(image, lm) };
}

/**
 * The descriptor of the face in `box` of `img` (the target or a result), read upright. face-api's
 * descriptor crop is not rotated, and its recognition net reads roll as identity: the sheet's
 * source herself, rotated by ±25°, reads 0.33 and 0.67 from her own upright descriptor, and sample1's
 * face 2 (rolled 47°) read 0.64 before and after a swap that, read upright, moved it 0.87 -> 0.43.
 * A face rolled more than the swap's MIN_ROLL (by the target's landmarks `targetLm`, as the job finds
 * them) is read in the target's level frame, the one the swap works in, with its landmarks found
 * there again on `img`; any other exactly as the sheet's raw measure (landmarks found in `box`).
 */
export async function uprightDescriptor(img: RgbImage, box: Box, targetLm: readonly Point[]) {
  const reach = extendForehead(targetLm, DEFAULT_TUNING.forehead);
  const level = await levelled(img, targetLm, reach, refineLandmarks);
  if (!level.frame) return computeDescriptor(img, await detectLandmarks(img, box));
  return computeDescriptor(level.image, level.lm);
}

/** Distance between the eye centres (landmarks 36-41 and 42-47). */
function interOcular(lm: readonly Point[]): number {
  const c = (a: number, b: number) =>
    lm.slice(a, b).reduce((s, p) => ({ x: s.x + p.x / (b - a), y: s.y + p.y / (b - a) }), { x: 0, y: 0 });
  const l = c(36, 42);
  const r = c(42, 48);
  return Math.hypot(l.x - r.x, l.y - r.y);
}

/** Mean distance of landmarks `from`..`to` of `b` from `a`'s, over `a`'s eye distance. */
export function landmarkError(a: readonly Point[], b: readonly Point[], from = 0, to = 68): number {
  let s = 0;
  for (let i = from; i < to; i++) s += Math.hypot(a[i]!.x - b[i]!.x, a[i]!.y - b[i]!.y);
  return s / (to - from) / interOcular(a);
}
