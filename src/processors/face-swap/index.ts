/**
 * Job type `image-face-swap`, model `warp-blend-v1`: puts the face from `source` onto the face(s) in
 * `target`. The work runs in a piscina pool of worker threads (models loaded once per thread), so the
 * API's event loop never waits on it.
 */
import '../sharp.js'; // loaded by the main thread before any worker thread (see sharp.ts)
import { JobError } from '../../errors.js';
import type { FetchedMedia, JobType, ProcessorResult, RunContext } from '../types.js';
import {
  DEFAULT_MAX_PIXELS,
  JOB_TYPE_NAME,
  MODEL_WARP_BLEND_V1,
  faceSwapOptionsSchema,
  type FaceSwapOptions,
} from './options.js';
import { checkFaceInput, checkInputs } from './pipeline.js';
import { createFaceThreadPool, runOnPool, type FaceThreadPool } from './pool.js';

export { faceSwapOptionsSchema, JOB_TYPE_NAME, MODEL_WARP_BLEND_V1, DEFAULT_MAX_PIXELS } from './options.js';
export { createFaceDetectJobType, FACE_DETECT, MODEL_FACE_DETECT_V1 } from './detect-job.js';
export { createFaceThreadPool, type FaceThreadPool } from './pool.js';
export type { FaceSwapOptions } from './options.js';
/** Pixel-free checks of the options against the slots given; usable at submit time for an early 400. */
export { checkInputs, effectiveFaceMode } from './pipeline.js';

export interface FaceSwapJobTypeOptions {
  /** Worker threads in the pool (default 1). Each holds its own copy of the models (~130 MB idle). */
  threads?: number;
  /** Largest accepted input, in pixels (width x height, default 40 MP). */
  maxPixels?: number;
  /** A pool shared with other face job types (face-detect); default: a pool of `threads` of its own. */
  pool?: FaceThreadPool;
}

export interface FaceSwapJobType extends JobType<typeof faceSwapOptionsSchema> {
  /** Starts the threads and loads the models now rather than on the first job. */
  warmup(): Promise<void>;
  /** Destroys the worker pool. A later run() starts a new one. */
  close(): Promise<void>;
}

/** The single image of a slot, as an owned copy whose buffer can be transferred to the worker. */
function slotBytes(media: FetchedMedia[] | undefined, slot: string, required: boolean): Uint8Array | undefined {
  const first = media?.[0];
  if (!first) {
    if (required) throw new JobError('invalid_media', `input.${slot}: required`);
    return undefined;
  }
  return new Uint8Array(first.bytes);
}

export function createFaceSwapJobType(opts: FaceSwapJobTypeOptions = {}): FaceSwapJobType {
  const maxPixels = opts.maxPixels ?? DEFAULT_MAX_PIXELS;
  // Created on first use: an API-only process that merely lists job types starts no threads.
  const threadPool = opts.pool ?? createFaceThreadPool(opts.threads);

  async function run(ctx: RunContext<FaceSwapOptions>): Promise<ProcessorResult> {
    if (ctx.model !== MODEL_WARP_BLEND_V1) throw new Error(`unknown model ${ctx.model} for ${JOB_TYPE_NAME}`);
    const options = faceSwapOptionsSchema.parse(ctx.options);
    const source = slotBytes(ctx.media.source, 'source', true)!;
    const target = slotBytes(ctx.media.target, 'target', true)!;
    const reference = slotBytes(ctx.media.reference, 'reference', false);
    checkInputs(options, reference !== undefined);
    ctx.signal.throwIfAborted();
    const buffers = [source.buffer, target.buffer, ...(reference ? [reference.buffer] : [])] as ArrayBuffer[];
    return runOnPool(
      threadPool,
      ctx,
      { kind: 'swap', input: { source, target, reference, options, maxPixels } },
      buffers,
    );
  }

  return {
    name: JOB_TYPE_NAME,
    description:
      'Replaces a face in the `target` image with the face from the `source` image. The face is ' +
      "warped to the target's pose and expression, colour-matched to the target's skin and lighting, " +
      'and blended in without a visible seam.',
    slots: {
      source: {
        required: true,
        min: 1,
        max: 1,
        accepts: 'image',
        description: 'The face to put in. When it shows several faces, the largest is used.',
      },
      target: {
        required: true,
        min: 1,
        max: 1,
        accepts: 'image',
        description: 'The picture to change. The result has its size and orientation.',
      },
      reference: {
        required: false,
        min: 1,
        max: 1,
        accepts: 'image',
        description:
          'A picture of the person in `target` whose face is to be replaced; the target face most ' +
          'similar to it (face-descriptor distance) is swapped. Implies `faces: reference`.',
      },
    },
    models: [
      {
        name: MODEL_WARP_BLEND_V1,
        description:
          'face-api 68-point landmarks, piecewise-affine warp over a Delaunay triangulation, CIELAB ' +
          'colour transfer and Poisson (or feathered) blending. Runs on CPU.',
      },
    ],
    options: faceSwapOptionsSchema,
    run,
    checkInput: checkFaceInput,
    warmup: () => threadPool.warmup(),
    close: () => threadPool.close(),
  };
}
