/**
 * Job type `image-face-swap`, model `warp-blend-v1`: puts the face from `source` onto the face(s) in
 * `target`. The work runs in a piscina pool of worker threads (models loaded once per thread), so the
 * API's event loop never waits on it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { MessageChannel } from 'node:worker_threads';
// sharp must be loaded by the main thread before any worker thread loads it (lovell/sharp#2263:
// otherwise glibc may unload libvips when a worker exits, and the next worker crashes).
import 'sharp';
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
import { lazyThreadPool, workerBeside } from '../thread-pool.js';
import { CONTROL_CANCELLED, STAGES_DONE, type WorkerReply, type WorkerTask } from './worker.js';

export { faceSwapOptionsSchema, JOB_TYPE_NAME, MODEL_WARP_BLEND_V1, DEFAULT_MAX_PIXELS } from './options.js';
export type { FaceSwapOptions } from './options.js';
/** Pixel-free checks of the options against the slots given; usable at submit time for an early 400. */
export { checkInputs, effectiveFaceMode } from './pipeline.js';

export interface FaceSwapJobTypeOptions {
  /** Worker threads in the pool (default 1). Each holds its own copy of the models (~130 MB idle). */
  threads?: number;
  /** Largest accepted input, in pixels (width x height, default 40 MP). */
  maxPixels?: number;
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
  const threads = Math.max(1, Math.floor(opts.threads ?? 1));
  const maxPixels = opts.maxPixels ?? DEFAULT_MAX_PIXELS;
  // Created on first use: an API-only process that merely lists job types starts no threads.
  const threadPool = lazyThreadPool<WorkerTask, WorkerReply>(workerBeside(import.meta.url), threads, {
    kind: 'warmup',
  });
  const getPool = threadPool.get;

  async function run(ctx: RunContext<FaceSwapOptions>): Promise<ProcessorResult> {
    if (ctx.model !== MODEL_WARP_BLEND_V1) throw new Error(`unknown model ${ctx.model} for ${JOB_TYPE_NAME}`);
    const options = faceSwapOptionsSchema.parse(ctx.options);
    const source = slotBytes(ctx.media.source, 'source', true)!;
    const target = slotBytes(ctx.media.target, 'target', true)!;
    const reference = slotBytes(ctx.media.reference, 'reference', false);
    checkInputs(options, reference !== undefined);
    ctx.signal.throwIfAborted();
    ctx.progress('starting face swap', { percent: 0 });

    const control = new Int32Array(new SharedArrayBuffer(4));
    const { port1, port2 } = new MessageChannel();
    let stagesDone!: () => void;
    const allStages = new Promise<void>((resolve) => (stagesDone = resolve));
    port1.on('message', (msg: unknown) => {
      if (msg === STAGES_DONE) stagesDone();
      else if (typeof msg === 'string' && !ctx.signal.aborted) ctx.progress(msg);
    });
    const transferList = [port2, source.buffer, target.buffer, ...(reference ? [reference.buffer] : [])];
    const task = getPool().run(
      { kind: 'swap', input: { source, target, reference, options, maxPixels }, port: port2, control },
      { transferList: transferList as ArrayBuffer[] },
    );

    // Cancellation is cooperative: the worker sees the flag between stages (≤ ~0.5 s) and stops, and
    // this promise settles at once. Piscina's own `signal` would instead terminate the thread, which
    // loses the loaded models and can crash the process if sharp is mid-operation in that thread.
    let onAbort: (() => void) | undefined;
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => {
        Atomics.store(control, 0, CONTROL_CANCELLED);
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the signal's own reason (an Error) is what the worker inspects
        reject(ctx.signal.reason ?? new Error('aborted'));
      };
      ctx.signal.addEventListener('abort', onAbort, { once: true });
    });
    task.catch(() => {}); // if the abort wins the race, a late failure must not go unhandled
    aborted.catch(() => {});
    let reply: WorkerReply;
    try {
      reply = await Promise.race([task, aborted]);
      // The reply and the stage messages travel on different ports, so the reply can overtake the
      // last stages. The worker ends the stages with a marker on the stage port itself (in order).
      await Promise.race([allStages, sleep(1000, undefined, { ref: false })]);
    } finally {
      if (onAbort) ctx.signal.removeEventListener('abort', onAbort);
      port1.close();
    }
    switch (reply.kind) {
      case 'ok':
        return {
          bytes: Buffer.from(reply.bytes.buffer, reply.bytes.byteOffset, reply.bytes.byteLength),
          contentType: reply.contentType,
          extension: reply.extension,
        };
      case 'job-error':
        throw new JobError(reply.errorType, reply.message);
      case 'cancelled':
        throw ctx.signal.reason ?? new Error('aborted');
      default:
        throw new Error(`unexpected worker reply ${reply.kind}`);
    }
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
