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
  largestFaceLandmarks,
  leftToRight,
} from './detect.js';
import { CONTENT_TYPES, EXTENSIONS, decodeImage, encodeImage } from './image.js';
import type { FaceMode, FaceSwapOptions } from './options.js';
import { swapFace } from './swap.js';
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

/** The faces at `indices` of a left-to-right list, or invalid_media naming the input and the count. */
export function pickByIndex<T>(faces: readonly T[], indices: readonly number[], label: string, where = ''): T[] {
  return indices.map((i) => {
    const f = faces[i];
    if (f === undefined) {
      const n = faces.length;
      throw new JobError(
        'invalid_media',
        `${label}: no face at index ${i} (${n} face${n === 1 ? '' : 's'} found${where}, indices 0-${n - 1})`,
      );
    }
    return f;
  });
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

export async function runFaceSwap(input: SwapJobInput, hooks: PipelineHooks): Promise<SwapJobOutput> {
  const { options, maxPixels } = input;
  const hasReference = input.reference !== undefined;
  checkInputs(options, hasReference);
  const mode = effectiveFaceMode(options, hasReference);

  hooks.progress('detecting faces');
  const [source, target, reference] = await Promise.all([
    decodeImage(input.source, 'input.source', maxPixels),
    decodeImage(input.target, 'input.target', maxPixels),
    input.reference ? decodeImage(input.reference, 'input.reference', maxPixels) : undefined,
  ]);
  hooks.checkAborted();

  // One detector for every input (findFaces, face-detect's), so indices mean the same faces; the
  // source's largest face alone (no index) comes cheaper (findLargeFaces).
  let srcLandmarks: Point[];
  if (options.source_face_index === undefined) {
    const faces = await findLargeFaces(source, options.min_confidence);
    if (faces.length === 0) throw new JobError('invalid_media', 'input.source: no face found');
    srcLandmarks = await largestFaceLandmarks(source, faces);
  } else {
    const faces = leftToRight(await findFaces(source, options.min_confidence));
    if (faces.length === 0) throw new JobError('invalid_media', 'input.source: no face found');
    const face = pickByIndex(faces, [options.source_face_index], 'input.source')[0]!;
    srcLandmarks = await detectLandmarks(source, face.box);
  }
  hooks.checkAborted();
  const dstFaces = await findFaces(target, options.min_confidence);
  if (dstFaces.length === 0) throw new JobError('invalid_media', 'input.target: no face found');
  hooks.checkAborted();

  let chosen: Point[][];
  if (mode === 'reference') {
    chosen = [await matchReference(reference!, target, dstFaces, options, hooks)];
  } else if (options.target_face_indices === undefined && mode !== 'all') {
    chosen = [await largestFaceLandmarks(target, dstFaces)];
  } else {
    const boxes: Box[] = options.target_face_indices
      ? pickByIndex(leftToRight(dstFaces), options.target_face_indices, 'input.target').map((f) => f.box)
      : dstFaces.map((f) => f.box);
    chosen = [];
    for (const box of boxes) chosen.push(await detectLandmarks(target, box));
  }
  hooks.checkAborted();

  // Identity depends on the landmarks of the two faces: one more pass each, from their own crop.
  srcLandmarks = await refineLandmarks(source, srcLandmarks);
  for (let k = 0; k < chosen.length; k++) chosen[k] = await refineLandmarks(target, chosen[k]!);
  hooks.checkAborted();

  hooks.progress('swapping faces');
  const blendOpts = { blend: options.blend, colorCorrection: options.color_correction };
  for (const dstLandmarks of chosen) {
    await swapFace(target, dstLandmarks, source, srcLandmarks, blendOpts);
    hooks.checkAborted();
  }

  hooks.progress('encoding');
  const bytes = await encodeImage(target, options.format, options.quality);
  return {
    bytes,
    contentType: CONTENT_TYPES[options.format],
    extension: EXTENSIONS[options.format],
    facesSwapped: chosen.length,
  };
}

/** Landmarks of the target face whose descriptor is nearest the reference face's, if near enough. */
async function matchReference(
  reference: RgbImage,
  target: RgbImage,
  dstFaces: { box: Box }[],
  options: FaceSwapOptions,
  hooks: PipelineHooks,
): Promise<Point[]> {
  const refFaces = await findLargeFaces(reference, options.min_confidence);
  if (refFaces.length === 0) throw new JobError('invalid_media', 'input.reference: no face found');
  const refLandmarks = await largestFaceLandmarks(reference, refFaces);
  const refDescriptor = await computeDescriptor(reference, refLandmarks);
  hooks.checkAborted();
  let best: { landmarks: Point[]; distance: number } | undefined;
  for (const face of dstFaces) {
    const landmarks = await detectLandmarks(target, face.box);
    const distance = descriptorDistance(refDescriptor, await computeDescriptor(target, landmarks));
    if (!best || distance < best.distance) best = { landmarks, distance };
    hooks.checkAborted();
  }
  if (!best || best.distance > options.match_threshold) {
    throw new JobError(
      'invalid_media',
      `input.reference: no face in input.target matches the reference face ` +
        `(closest distance ${best ? best.distance.toFixed(2) : 'n/a'}, match_threshold ${options.match_threshold})`,
    );
  }
  return best.landmarks;
}

export interface DetectJobInput {
  target: Uint8Array;
  minConfidence: number;
  maxPixels: number;
}

/** face-detect's result (docs/api.md, Faces): every face, left to right, with its box and 68 landmarks. */
export interface DetectResult {
  width: number;
  height: number;
  faces: { index: number; box: Box; score: number; landmarks: [number, number][] }[];
}

const r1 = (v: number) => Math.round(v * 10) / 10;

/** The face-detect job: the same decoding, detector and order as the swap, as JSON. */
export async function runFaceDetect(input: DetectJobInput, hooks: PipelineHooks): Promise<DetectResult> {
  hooks.progress('detecting faces');
  const target = await decodeImage(input.target, 'input.target', input.maxPixels);
  hooks.checkAborted();
  const found = leftToRight(await findFaces(target, input.minConfidence));
  const faces: DetectResult['faces'] = [];
  for (const [index, f] of found.entries()) {
    hooks.checkAborted();
    const landmarks = await detectLandmarks(target, f.box);
    faces.push({
      index,
      box: { x: r1(f.box.x), y: r1(f.box.y), width: r1(f.box.width), height: r1(f.box.height) },
      score: Math.round(f.score * 1000) / 1000,
      landmarks: landmarks.map((p) => [r1(p.x), r1(p.y)]),
    });
  }
  return { width: target.width, height: target.height, faces };
}
