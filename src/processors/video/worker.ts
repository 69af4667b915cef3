/**
 * Piscina worker for the video face swap: small, stateless per-frame tasks (detect on a key frame,
 * landmarks on a tracked crop, swap the face region of one frame), so a cancelled job frees its
 * thread within one task. The job runs two pools of this module: one `models` thread that loads
 * the face models and does all detection, landmark and descriptor work, and `swap` threads that
 * never load them (each set of models with its tfjs heap costs ~250 MB of RSS). A JobError travels
 * back as data, since structured cloning would turn it into a plain Error.
 */
import { move, transferableSymbol, valueSymbol } from 'piscina';
import { type ErrorType } from '../../contract/api.js';
import { JobError } from '../../errors.js';
import {
  computeDescriptor,
  detectLandmarks,
  findFaces,
  leftToRight,
  locateFacesTiny,
  refineLandmarks,
} from '../face-swap/detect.js';
import { boundingRegion, faceSize } from '../face-swap/geometry.js';
import { decodeImage, resizeRegion } from '../face-swap/image.js';
import { pickByIndex } from '../face-swap/pipeline.js';
import { refuseSource } from '../face-swap/profile.js';
import { levelled } from '../face-swap/level.js';
import { detachOnce, warmSwap, warmTracking } from '../face-swap/warmup.js';
import { extendForehead, withoutSourceHair, type ColorStats } from '../face-swap/swap.js';
import { FRAME_TUNING, swapFrame, type FrameSwap } from './frame-swap.js';
import { warmFrameSwaps } from './warmup.js';
import type { Box, Point, RgbImage } from '../face-swap/types.js';

/** The source face is kept at most this big (face size, px): larger only costs warp time per frame. */
const SOURCE_FACE_MAX = 360;

export interface PreparedSource {
  image: RgbImage;
  landmarks: Point[];
  descriptor: Float32Array;
}

export interface FoundFace {
  box: Box;
  score: number;
  landmarks: Point[];
  descriptor?: Float32Array;
}

export type VideoTask =
  /**
   * `models`: load the face models and run them once (the models thread); a swap thread loads no
   * models but swaps small synthetic faces, so V8 has compiled the swap's loops before the first job
   * (cold, they cost ~2 CPU-s over a job's first second on two threads).
   */
  | { kind: 'warmup'; models: boolean }
  | {
      kind: 'prepare';
      source: Uint8Array;
      reference?: Uint8Array | undefined;
      minConfidence: number;
      maxPixels: number;
      /** face-detect index of the source face; default the largest. */
      sourceFaceIndex?: number | undefined;
    }
  /** `precise`: the image job's detector (findFaces), whose faces and order face-detect reports. */
  | { kind: 'detect'; frame: RgbImage; minConfidence: number; descriptors: boolean; precise?: boolean }
  | { kind: 'landmarks'; crop: RgbImage; boxes: Box[] }
  | { kind: 'descriptor'; crop: RgbImage; landmarks: Point[] }
  /** The face region of a frame swapped in place and sent back. */
  | ({ kind: 'swap' } & FrameSwap);

export type VideoReply =
  | { kind: 'ready' }
  | { kind: 'prepared'; source: PreparedSource; reference?: Float32Array | undefined }
  | { kind: 'faces'; faces: FoundFace[] }
  | { kind: 'landmarks'; landmarks: Point[][] }
  | { kind: 'descriptor'; descriptor: Float32Array }
  | { kind: 'swapped'; frame: RgbImage; stats: (ColorStats | undefined)[] }
  | { kind: 'job-error'; errorType: ErrorType; message: string };

/**
 * Decodes an image input and finds its largest face (or the one at face-detect's `index`): landmarks
 * (refined, as the image swap's), box and descriptor.
 */
async function faceOf(bytes: Uint8Array, label: string, minConfidence: number, maxPixels: number, index?: number) {
  const img = await decodeImage(bytes, label, maxPixels);
  const found = await findFaces(img, minConfidence);
  if (found.length === 0) throw new JobError('invalid_media', `${label}: no face found`);
  const face = index === undefined ? found[0]! : pickByIndex(leftToRight(found), [index], label)[0]!;
  const landmarks = await detectLandmarks(img, face.box);
  const descriptor = await computeDescriptor(img, landmarks);
  return { img, box: face.box, landmarks: await refineLandmarks(img, landmarks), descriptor };
}

/** The source face cropped (with room for the forehead extension) and shrunk to SOURCE_FACE_MAX. */
async function cropSource(img: RgbImage, landmarks: Point[]): Promise<{ image: RgbImage; landmarks: Point[] }> {
  const size = faceSize(landmarks);
  const r = boundingRegion(extendForehead(landmarks, 0.3), 0.25 * size, img.width, img.height);
  const k = Math.min(1, SOURCE_FACE_MAX / size);
  const w = Math.max(2, Math.round(r.width * k));
  const h = Math.max(2, Math.round(r.height * k));
  const image = await resizeRegion(img, r, w, h);
  const kx = r.width / w;
  const ky = r.height / h;
  return { image, landmarks: landmarks.map((p) => ({ x: (p.x - r.left) / kx, y: (p.y - r.top) / ky })) };
}

async function handleTask(task: VideoTask): Promise<VideoReply> {
  switch (task.kind) {
    case 'warmup':
      detachOnce();
      if (task.models) await warmTracking();
      else await warmSwap().then(() => warmFrameSwaps());
      return { kind: 'ready' };
    case 'prepare': {
      const src = await faceOf(task.source, 'input.source', task.minConfidence, task.maxPixels, task.sourceFaceIndex);
      // One picture: a source the image swap refuses (profile, too small, eyes not showing) fails the job.
      refuseSource(src.img, { lm: src.landmarks, box: src.box }, task.sourceFaceIndex);
      const ref = task.reference
        ? await faceOf(task.reference, 'input.reference', task.minConfidence, task.maxPixels)
        : undefined;
      // Level once (a rolled source's landmarks found again upright), like the image job's source.
      const reach = extendForehead(src.landmarks, 0.3);
      const level = await levelled(src.img, src.landmarks, reach, refineLandmarks);
      const cropped = await cropSource(level.image, level.lm);
      const image = withoutSourceHair(cropped.image, cropped.landmarks, FRAME_TUNING);
      return {
        kind: 'prepared',
        source: { image, landmarks: cropped.landmarks, descriptor: src.descriptor },
        reference: ref?.descriptor,
      };
    }
    case 'detect': {
      const boxes = task.precise
        ? await findFaces(task.frame, task.minConfidence)
        : await locateFacesTiny(task.frame, task.minConfidence);
      const faces: FoundFace[] = [];
      for (const b of boxes) {
        // Precise: the image swap's landmarks (refined), on which it judges faces picked by index.
        const first = await detectLandmarks(task.frame, b.box);
        const landmarks = task.precise ? await refineLandmarks(task.frame, first) : first;
        const face: FoundFace = { ...b, landmarks };
        if (task.descriptors) face.descriptor = await computeDescriptor(task.frame, landmarks);
        faces.push(face);
      }
      return { kind: 'faces', faces };
    }
    case 'landmarks': {
      const landmarks: Point[][] = [];
      for (const b of task.boxes) landmarks.push(await detectLandmarks(task.crop, b));
      return { kind: 'landmarks', landmarks };
    }
    case 'descriptor':
      return { kind: 'descriptor', descriptor: await computeDescriptor(task.crop, task.landmarks) };
    case 'swap':
      return { kind: 'swapped', frame: task.frame, stats: await swapFrame(task) };
  }
}

export default async function handle(task: VideoTask): Promise<VideoReply> {
  try {
    const reply = await handleTask(task);
    // The swapped region goes back by transfer, not by a structured-clone copy.
    if (reply.kind !== 'swapped') return reply;
    const movable = { [transferableSymbol]: [reply.frame.data.buffer], [valueSymbol]: reply };
    return move(movable) as unknown as VideoReply;
  } catch (err) {
    if (err instanceof JobError) return { kind: 'job-error', errorType: err.errorType, message: err.message };
    throw err;
  }
}
