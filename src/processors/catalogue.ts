import type { JobType } from './types.js';
import os from 'node:os';
import { createFaceDetectJobType, createFaceSwapJobType, createFaceThreadPool } from './face-swap/index.js';
import { withFacePictures } from './face-detect-pictures.js';
import { createImageTransformJobType } from './image-transform.js';
import { createVideoFaceSwapJobType } from './video/face-swap.js';
import { resolveBinaries } from './video/ffmpeg.js';
import { createVideoFromImageAudioJobType } from './video/from-image-audio.js';
import { DEFAULT_VIDEO_LIMITS } from './video/options.js';

/** The job types a service runs. Extra types (e.g. a benchmark's no-op) can be passed in. */
export class Catalogue {
  private readonly types = new Map<string, JobType>();

  constructor(types: JobType[]) {
    for (const t of types) {
      if (this.types.has(t.name)) throw new Error(`job type ${t.name} registered twice`);
      this.types.set(t.name, t);
    }
  }

  get(name: string): JobType | undefined {
    return this.types.get(name);
  }

  list(): JobType[] {
    return [...this.types.values()];
  }

  /**
   * Warms every type that can be warmed, all at once; each type's time, or its error (a type that
   * fails to warm still runs its jobs, paying the cost then).
   */
  async warmup(): Promise<Array<{ type: string; ms: number; error?: unknown }>> {
    const warmable = this.list().filter((t) => t.warmup);
    return Promise.all(
      warmable.map(async (t) => {
        const t0 = performance.now();
        try {
          await t.warmup?.();
          return { type: t.name, ms: Math.round(performance.now() - t0) };
        } catch (error) {
          return { type: t.name, ms: Math.round(performance.now() - t0), error };
        }
      }),
    );
  }

  async close(): Promise<void> {
    await Promise.all(
      this.list().map(async (t) => {
        await t.close?.();
      }),
    );
  }
}

/**
 * Where the image face jobs are when each stage starts (percent of the whole job), after the
 * measured stage times of docs/face-swap.md: of a swap's processing, detection takes about half,
 * the swap 40 % and encoding 10 %; the download is given the first tenth.
 */
const FACE_SWAP_STAGES = { 'downloading media': 0, 'detecting faces': 10, 'swapping faces': 55, encoding: 90 };
const FACE_DETECT_STAGES = { 'downloading media': 0, 'detecting faces': 20 };

export interface DefaultTypesOptions {
  /** Threads for CPU-heavy types that run in worker threads. */
  threads: number;
  /** Video limits and ffmpeg location (Config.video); defaults: 120 s, 1920x1080, the npm-shipped ffmpeg. */
  video?: { maxSeconds: number; maxPixels: number; ffmpegPath?: string | undefined; ffprobePath?: string | undefined };
}

export function defaultJobTypes(opts: DefaultTypesOptions): JobType[] {
  const threads = Math.max(1, Math.min(opts.threads, os.availableParallelism()));
  const limits = opts.video
    ? { maxSeconds: opts.video.maxSeconds, maxPixels: opts.video.maxPixels }
    : DEFAULT_VIDEO_LIMITS;
  // Resolved lazily: a missing ffmpeg fails the video jobs, not the service's start.
  let bins: ReturnType<typeof resolveBinaries> | undefined;
  const binaries = () =>
    (bins ??= resolveBinaries({
      FFMPEG_PATH: opts.video?.ffmpegPath ?? process.env.FFMPEG_PATH,
      FFPROBE_PATH: opts.video?.ffprobePath ?? process.env.FFPROBE_PATH,
    }));
  // One pool for the image face types: each thread holds the face models once. Threads start on the
  // first job, so API-only processes never load them.
  const facePool = createFaceThreadPool(threads);
  return [
    createImageTransformJobType(),
    Object.assign(createFaceSwapJobType({ pool: facePool }), { stages: FACE_SWAP_STAGES }),
    Object.assign(withFacePictures(createFaceDetectJobType({ pool: facePool })), { stages: FACE_DETECT_STAGES }),
    createVideoFaceSwapJobType({ threads, limits, binaries }),
    createVideoFromImageAudioJobType({ limits, binaries }),
  ];
}
