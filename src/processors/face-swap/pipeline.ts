/**
 * The whole job, in whatever thread calls it (the worker thread in production): decode, find faces,
 * pick the target faces, swap, encode. Failures the client can fix are JobError('invalid_media').
 */
import { JobError } from '../../errors.js';
import {
  computeDescriptor,
  descriptorDistance,
  detectLandmarks,
  refineLandmarks,
  findFaces,
  findLargeFaces,
  largestFace,
  largestFaceLandmarks,
  leftToRight,
} from './detect.js';
import { CONTENT_TYPES, EXTENSIONS, decodeImage, encodeImage } from './image.js';
import type { FaceMode, FaceSwapOptions } from './options.js';
import { levelled, swapLevelled } from './level.js';
import { refuseSource, swappability, swappableTargets, type FoundFace } from './profile.js';
import { DEFAULT_TUNING, extendForehead, PREPARED_TUNING, withoutSourceHair } from './swap.js';
import { boxZone } from './guard.js';
import type { Box, Point, RgbImage } from './types.js';

export interface SwapJobInput {
  source: Uint8Array;
  target: Uint8Array;
  reference?: Uint8Array | undefined;
  options: FaceSwapOptions;
  maxPixels: number;
}

export interface SwapJobOutput {
  bytes: Uint8Array;
  contentType: string;
  extension: string;
  /** How many faces of the target were replaced. */
  facesSwapped: number;
}

export interface PipelineHooks {
  /** Stage names for the job's status_detail. */
  progress(stage: string): void;
  /** Throws when the job was cancelled; called between stages. */
  checkAborted(): void;
}

/** Which faces mode applies: explicit option, else `reference` when a reference image came along. */
export function effectiveFaceMode(options: Pick<FaceSwapOptions, 'faces'>, hasReference: boolean): FaceMode {
  return options.faces ?? (hasReference ? 'reference' : 'largest');
}

/** Checks that need no pixels, so a bad combination fails before any decoding. */
export function checkInputs(
  options: Pick<FaceSwapOptions, 'faces' | 'target_face_indices'>,
  hasReference: boolean,
): void {
  if (options.target_face_indices !== undefined) {
    if (hasReference) {
      throw new JobError('invalid_media', 'input.target_face_indices: cannot be combined with a reference image');
    }
    if (options.faces !== undefined && options.faces !== 'largest') {
      throw new JobError(
        'invalid_media',
        `input.target_face_indices: cannot be combined with faces "${options.faces}" (the indices pick the faces)`,
      );
    }
  }
  const mode = effectiveFaceMode(options, hasReference);
  if (mode === 'reference' && !hasReference) {
    throw new JobError('invalid_media', 'input.reference: required when faces is "reference"');
  }
  if (mode !== 'reference' && hasReference) {
    throw new JobError('invalid_media', `input.reference: only used when faces is "reference" (faces is "${mode}")`);
  }
}

/** Every index of `indices` that names no face of `n`, in one sentence, or undefined when all exist. */
export function missingFaces(n: number, indices: readonly number[], label: string, where = ''): string | undefined {
  const bad = [...new Set(indices.filter((i) => !(i >= 0 && i < n)))];
  if (bad.length === 0) return undefined;
  const at = bad.length === 1 ? `index ${bad[0]}` : `indices ${bad.join(', ')}`;
  return `${label}: no face at ${at} (${n} face${n === 1 ? '' : 's'} found${where}, indices 0-${n - 1})`;
}

/** The faces at `indices`; an index with no face fails the job, naming every such index. */
export function pickByIndex<T>(faces: readonly T[], indices: readonly number[], label: string, where = ''): T[] {
  const problem = missingFaces(faces.length, indices, label, where);
  if (problem !== undefined) throw new JobError('invalid_media', problem);
  return indices.map((i) => faces[i]!);
}

/** checkInputs at submit time (JobType.checkInput): the offending field under `input` and why, or undefined. */
export function checkFaceInput(input: Record<string, unknown>): { field: string; message: string } | undefined {
  try {
    checkInputs(input, input.reference !== undefined);
    return undefined;
  } catch (err) {
    // checkInputs phrases its messages as "input.reference: …" for failed jobs.
    const m = /^input\.(\w+): (.*)$/.exec((err as Error).message);
    return m ? { field: m[1]!, message: m[2]! } : { field: 'reference', message: (err as Error).message };
  }
}

/** The decoded inputs of one swap job. */
export interface SwapImages {
  source: RgbImage;
  target: RgbImage;
  reference?: RgbImage | undefined;
}

/** The faces a swap job works on: the source face's landmarks and each target face's, refined. */
export interface SwapFaces {
  source: Point[];
  targets: Point[][];
  /** Every face found in the target: the outline move keeps out of them (guard.ts). */
  boxes?: Box[] | undefined;
}

export async function runFaceSwap(input: SwapJobInput, hooks: PipelineHooks): Promise<SwapJobOutput> {
  const { options } = input;
  checkInputs(options, input.reference !== undefined);
  hooks.progress('detecting faces');
  const images = await decodeInputs(input);
  hooks.checkAborted();
  const faces = await findSwapFaces(images, options, hooks);
  hooks.progress('swapping faces');
  await swapAll(images, faces, options, hooks);
  hooks.progress('encoding');
  return {
    bytes: await encodeImage(images.target, options.format, options.quality),
    contentType: CONTENT_TYPES[options.format],
    extension: EXTENSIONS[options.format],
    facesSwapped: faces.targets.length,
  };
}

/** Stage 1: every input decoded (in parallel: libvips runs them on its own threads). */
export async function decodeInputs(input: SwapJobInput): Promise<SwapImages> {
  const [source, target, reference] = await Promise.all([
    decodeImage(input.source, 'input.source', input.maxPixels),
    decodeImage(input.target, 'input.target', input.maxPixels),
    input.reference ? decodeImage(input.reference, 'input.reference', input.maxPixels) : undefined,
  ]);
  return { source, target, reference };
}

/**
 * Stage 2: the source face and the target faces to replace, with landmarks refined on their own
 * crops (identity depends on them). One detector for every input (findFaces, face-detect's), so
 * indices mean the same faces; the source's largest face alone (no index) comes cheaper.
 */
export async function findSwapFaces(
  images: SwapImages,
  options: FaceSwapOptions,
  hooks: PipelineHooks,
): Promise<SwapFaces> {
  const { source, target } = images;
  const srcIndex = options.source_face_index;
  const srcFaces =
    srcIndex === undefined
      ? await findLargeFaces(source, options.min_confidence)
      : leftToRight(await findFaces(source, options.min_confidence));
  if (srcFaces.length === 0) throw new JobError('invalid_media', 'input.source: no face found');
  hooks.checkAborted();
  const largestOnly =
    options.target_face_indices === undefined &&
    effectiveFaceMode(options, images.reference !== undefined) === 'largest';
  const dstFaces = await findFaces(target, options.min_confidence, { largestOnly });
  if (dstFaces.length === 0) throw new JobError('invalid_media', 'input.target: no face found');
  // Every index of both inputs that names no face, in one answer.
  const missing = [
    srcIndex !== undefined ? missingFaces(srcFaces.length, [srcIndex], 'input.source') : undefined,
    options.target_face_indices && missingFaces(dstFaces.length, options.target_face_indices, 'input.target'),
  ].filter((m) => m !== undefined);
  if (missing.length > 0) throw new JobError('invalid_media', missing.join('; '));
  const srcFound =
    srcIndex === undefined
      ? await largestFace(source, srcFaces)
      : { lm: await detectLandmarks(source, srcFaces[srcIndex]!.box), box: srcFaces[srcIndex]!.box };
  hooks.checkAborted();
  const chosen = await chooseTargets(images, dstFaces, options, hooks);
  hooks.checkAborted();
  const srcFace = { lm: await refineLandmarks(source, srcFound.lm), box: srcFound.box };
  const targets: FoundFace[] = [];
  for (const f of chosen) targets.push({ lm: await refineLandmarks(target, f.lm), box: f.box });
  hooks.checkAborted();
  refuseSource(source, srcFace, srcIndex);
  const all = effectiveFaceMode(options, images.reference !== undefined) === 'all';
  const kept = swappableTargets(target, targets, all, options.target_face_indices);
  return { source: srcFace.lm, targets: kept.map((f) => f.lm), boxes: dstFaces.map((f) => f.box) };
}

/** The target faces the options pick (the largest, all, by index, or by reference): landmarks and box. */
async function chooseTargets(
  images: SwapImages,
  dstFaces: { box: Box }[],
  options: FaceSwapOptions,
  hooks: PipelineHooks,
): Promise<FoundFace[]> {
  const { target, reference } = images;
  const mode = effectiveFaceMode(options, reference !== undefined);
  if (mode === 'reference') return [await matchReference(reference!, target, dstFaces, options, hooks)];
  if (options.target_face_indices === undefined && mode !== 'all') {
    return [await largestFace(target, dstFaces)];
  }
  const boxes: Box[] = options.target_face_indices
    ? pickByIndex(leftToRight(dstFaces), options.target_face_indices, 'input.target').map((f) => f.box)
    : dstFaces.map((f) => f.box);
  const chosen: FoundFace[] = [];
  for (const box of boxes) chosen.push({ lm: await detectLandmarks(target, box), box });
  return chosen;
}

/** Stage 3: the source face, levelled, swapped into each target face in turn (in place). */
export async function swapAll(
  images: SwapImages,
  faces: SwapFaces,
  options: FaceSwapOptions,
  hooks: PipelineHooks,
): Promise<void> {
  // Every face found, and the targets' own outlines: no outline move reaches into another face.
  const keepOut = [
    ...(faces.boxes ?? []).map(boxZone),
    ...faces.targets.map((lm) => extendForehead(lm, DEFAULT_TUNING.forehead)),
  ];
  const blendOpts = { blend: options.blend, colorCorrection: options.color_correction, keepOut };
  // Both faces level (a rolled one is cut out level and its landmarks found again there).
  const forehead = extendForehead(faces.source, DEFAULT_TUNING.forehead);
  const src = await levelled(images.source, faces.source, forehead, refineLandmarks);
  // The source's hair over its face filled once, where the photo beyond its outline is known
  // (hairline.ts: a blonde temple strand the skin model calls skin), as the video job does; the
  // swaps then do not look for it again.
  const prepared = withoutSourceHair(src.image, src.lm);
  for (const dstLandmarks of faces.targets) {
    await swapLevelled(images.target, dstLandmarks, prepared, src.lm, blendOpts, refineLandmarks, PREPARED_TUNING);
    hooks.checkAborted();
  }
}

/** The target face (landmarks and box) whose descriptor is nearest the reference face's, if near enough. */
async function matchReference(
  reference: RgbImage,
  target: RgbImage,
  dstFaces: { box: Box }[],
  options: FaceSwapOptions,
  hooks: PipelineHooks,
): Promise<FoundFace> {
  const refFaces = await findLargeFaces(reference, options.min_confidence);
  if (refFaces.length === 0) throw new JobError('invalid_media', 'input.reference: no face found');
  const refLandmarks = await largestFaceLandmarks(reference, refFaces);
  const refDescriptor = await computeDescriptor(reference, refLandmarks);
  hooks.checkAborted();
  let best: { face: FoundFace; distance: number } | undefined;
  for (const { box } of dstFaces) {
    const lm = await detectLandmarks(target, box);
    const distance = descriptorDistance(refDescriptor, await computeDescriptor(target, lm));
    if (!best || distance < best.distance) best = { face: { lm, box }, distance };
    hooks.checkAborted();
  }
  if (!best || best.distance > options.match_threshold) {
    throw new JobError(
      'invalid_media',
      `input.reference: no face in input.target matches the reference face ` +
        `(closest distance ${best ? best.distance.toFixed(2) : 'n/a'}, match_threshold ${options.match_threshold})`,
    );
  }
  return best.face;
}

export interface DetectJobInput {
  target: Uint8Array;
  minConfidence: number;
  maxPixels: number;
}

/**
 * face-detect's result (docs/api.md, Faces): every face, left to right, with its box, 68 landmarks
 * and whether the swap would take it (`reason` only when it would not).
 */
export interface DetectResult {
  width: number;
  height: number;
  faces: ({ index: number; box: Box; score: number; landmarks: [number, number][] } & ReturnType<
    typeof swappability
  >)[];
}

const r1 = (v: number) => Math.round(v * 10) / 10;

/** The face-detect job: the same decoding, detector, order and refusals (profile.ts) as the swap, as JSON. */
export async function runFaceDetect(input: DetectJobInput, hooks: PipelineHooks): Promise<DetectResult> {
  hooks.progress('detecting faces');
  const target = await decodeImage(input.target, 'input.target', input.maxPixels);
  hooks.checkAborted();
  const found = leftToRight(await findFaces(target, input.minConfidence));
  const faces: DetectResult['faces'] = [];
  for (const [index, f] of found.entries()) {
    hooks.checkAborted();
    const landmarks = await detectLandmarks(target, f.box);
    // Judged on the landmarks the swap judges (findSwapFaces: this box's, refined), by its own rule.
    const verdict = swappability(target, await refineLandmarks(target, landmarks));
    faces.push({
      index,
      box: { x: r1(f.box.x), y: r1(f.box.y), width: r1(f.box.width), height: r1(f.box.height) },
      score: Math.round(f.score * 1000) / 1000,
      landmarks: landmarks.map((p) => [r1(p.x), r1(p.y)]),
      ...verdict,
    });
  }
  return { width: target.width, height: target.height, faces };
}
