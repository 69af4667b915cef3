/**
 * Job type `video-face-swap`, model `warp-blend-track-v1`: the image face swap applied to every frame
 * of a video, with tracking and temporal smoothing. ffmpeg decodes the target into raw rgb24 frames on
 * a pipe; this (main) thread runs the tracker (its detection and landmark nets run on one `models`
 * thread) and hands each frame's face region to the `swap` threads; the frames, with their swapped
 * regions pasted back, go in order through a second pipe into the encoder, which muxes in the
 * target's (or the `audio` slot's) soundtrack.
 */
import { detachOnce } from '../face-swap/warmup.js';
import path from 'node:path';
import '../sharp.js'; // loaded by the main thread before any worker thread (see sharp.ts)
import { JobError } from '../../errors.js';
import { checkFaceInput, checkInputs, effectiveFaceMode } from '../face-swap/pipeline.js';
import { lazyThreadPool, workerBeside } from '../thread-pool.js';
import { boxZone } from '../face-swap/guard.js';
import { refusalError, type Refusal } from '../face-swap/profile.js';
import { heldLight } from '../face-swap/light-order.js';
import { DEFAULT_TUNING, extendForehead, type ColorStats } from '../face-swap/swap.js';
import type { Box, Point, RgbImage } from '../face-swap/types.js';
import type { JobType, ProcessorResult, RunContext } from '../types.js';
import {
  audioArgs,
  checkVideo,
  containerArgs,
  durationLimit,
  maxFramesFor,
  rawFramesInput,
  rawFramesOutput,
  slotFile,
  videoArgs,
  videoResult,
  withWorkspace,
} from './encode.js';
import {
  FfmpegError,
  resolveBinaries,
  runToEnd,
  spawnPiped,
  type FfmpegBinaries,
  type SpawnedProcess,
} from './ffmpeg.js';
import { BufferPool, readFrames, writeFrame } from './frames.js';
import {
  DEFAULT_VIDEO_LIMITS,
  MODEL_WARP_BLEND_TRACK_V1,
  VIDEO_FACE_SWAP,
  videoFaceSwapOptionsSchema,
  type VideoFaceSwapOptions,
  type VideoLimits,
} from './options.js';
import { probeMedia, type VideoStreamInfo } from './probe.js';
import { FaceTracker, MEASURE_EVERY, type OtherFace, type Track } from './tracker.js';
import { HOLD, VerdictHold, type FrameFace, type MeasuredFrame, type ReadyFrame } from './hold.js';
import { cropFrame, pasteFrame, sharedImage, shiftPoints, swapRegion } from './region.js';
import type { VideoReply, VideoTask } from './worker.js';

/** Key frames (full detection) this often, in seconds; tracking in between. */
const KEY_FRAME_SECONDS = 1 / 3;
/** Weight of a new frame's colour statistics in a face's running average. */
const STATS_EMA = 0.1;
/** Most faces followed at once with `faces: all`. */
const MAX_FACES = 8;
/**
 * V8's young generation per thread, in MB (default 3 x 16): the threads' garbage is mostly large
 * typed arrays, which live outside it, so a small one costs no measurable CPU and saves ~25 MB of
 * RSS per thread.
 */
const YOUNG_GENERATION_MB = 8;
/** Largest accepted source/reference image, in pixels. */
const IMAGE_MAX_PIXELS = 40_000_000;

export interface VideoFaceSwapJobTypeOptions {
  /**
   * Swap threads (default 1): the frames of one job are spread over all of them. One more thread
   * holds the face models and runs detection and tracking for them.
   */
  threads?: number;
  limits?: VideoLimits;
  /** ffmpeg/ffprobe to run (default: FFMPEG_PATH/FFPROBE_PATH, else the npm-shipped builds), resolved per job. */
  binaries?: () => FfmpegBinaries;
}

export interface VideoFaceSwapJobType extends JobType<typeof videoFaceSwapOptionsSchema> {
  warmup(): Promise<void>;
  close(): Promise<void>;
}

/** Rejects as soon as `signal` aborts, whatever `p` does (the late result is ignored). */
function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  p.catch(() => {});
  // The signal's own reason (an Error) is what the worker inspects, so it is the rejection.
  const reason = () => signal.reason as Error;
  if (signal.aborted) return Promise.reject(reason());
  let onAbort = () => {};
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => {
      reject(reason());
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
  return Promise.race([p, aborted]).finally(() => {
    signal.removeEventListener('abort', onAbort);
  });
}

function blendStats(old: ColorStats | undefined, now: ColorStats, k: number): ColorStats {
  if (!old) return now;
  const mix = (a: [number, number, number], b: [number, number, number]) =>
    a.map((v, i) => v + k * (b[i]! - v)) as [number, number, number];
  return {
    src: { mean: mix(old.src.mean, now.src.mean), std: mix(old.src.std, now.src.std) },
    dst: { mean: mix(old.dst.mean, now.dst.mean), std: mix(old.dst.std, now.dst.std) },
    light: heldLight(old.light, now.light, k),
  };
}

/** ffmpeg filter that turns upright frames back into the target's stored orientation. */
function unrotate(rotation: 0 | 90 | 180 | 270): string[] {
  switch (rotation) {
    case 90:
      return ['-vf', 'transpose=cclock'];
    case 180:
      return ['-vf', 'hflip,vflip'];
    case 270:
      return ['-vf', 'transpose=clock'];
    default:
      return [];
  }
}

/** Calls a video thread (the swap pool for swaps, the models thread for the rest) for one reply kind. */
type Call = <K extends VideoReply['kind']>(
  task: VideoTask,
  kind: K,
  transfer?: ArrayBuffer[],
) => Promise<Extract<VideoReply, { kind: K }>>;

/** One job's run: its request, its workspace and the threads it calls. */
interface Job {
  ctx: RunContext<VideoFaceSwapOptions>;
  options: VideoFaceSwapOptions;
  mode: ReturnType<typeof effectiveFaceMode>;
  hasReference: boolean;
  bins: FfmpegBinaries;
  limits: VideoLimits;
  /** The job's duration limit in seconds. */
  limit: number;
  dir: string;
  signal: AbortSignal;
  call: Call;
  threads: number;
}

type Prepared = Extract<VideoReply, { kind: 'prepared' }>;

interface Inputs {
  targetFile: string;
  audioFile: string | undefined;
  v: VideoStreamInfo;
  audioCodec: string | undefined;
}

/** Frame size and output files: frames are decoded upright, whatever the target's rotation. */
interface Plan {
  width: number;
  height: number;
  frameBytes: number;
  maxFrames: number;
  keepRotation: boolean;
  encodedFile: string;
  outFile: string;
}

interface Coders {
  decoder: SpawnedProcess;
  encoder: SpawnedProcess;
}

interface Pending {
  done: Promise<{ frame: RgbImage; stats: (ColorStats | undefined)[] }>;
  tracks: Track[];
}

/** The request's model, options, face mode and required slots, checked before any file is written. */
function checkRequest(ctx: RunContext<VideoFaceSwapOptions>) {
  if (ctx.model !== MODEL_WARP_BLEND_TRACK_V1) throw new Error(`unknown model ${ctx.model} for ${VIDEO_FACE_SWAP}`);
  const options = videoFaceSwapOptionsSchema.parse(ctx.options);
  const hasReference = (ctx.media.reference?.length ?? 0) > 0;
  checkInputs(options, hasReference);
  const mode = effectiveFaceMode(options, hasReference);
  if (!ctx.media.source?.[0]) throw new JobError('invalid_media', 'input.source: required');
  if (!ctx.media.target?.[0]) throw new JobError('invalid_media', 'input.target: required');
  return { options, hasReference, mode };
}

/** Writes the target and audio into the workspace and probes them against the limits. */
async function readInputs(job: Job): Promise<Inputs> {
  const { ctx, dir, bins, signal } = job;
  const targetFile = (await slotFile(dir, ctx.media.target, 'target'))!;
  const audioFile = await slotFile(dir, ctx.media.audio, 'audio');
  ctx.progress('reading video');
  const info = await probeMedia(bins.ffprobe, targetFile, 'input.target', signal);
  const v = checkVideo('input.target', info, job.limits, job.limit);
  let audioCodec = info.audio?.codec;
  if (audioFile) {
    const a = await probeMedia(bins.ffprobe, audioFile, 'input.audio', signal);
    if (!a.audio) throw new JobError('invalid_media', 'input.audio: no audio stream');
    audioCodec = a.audio.codec;
  }
  return { targetFile, audioFile, v, audioCodec };
}

/** The source face (and the reference's descriptor), found on the models thread. */
async function prepareFaces(job: Job): Promise<Prepared> {
  const { ctx, options } = job;
  const source = new Uint8Array(ctx.media.source![0]!.bytes);
  const reference = job.hasReference ? new Uint8Array(ctx.media.reference![0]!.bytes) : undefined;
  return abortable(
    job.call(
      {
        kind: 'prepare',
        source,
        reference,
        minConfidence: options.min_confidence,
        maxPixels: IMAGE_MAX_PIXELS,
        sourceFaceIndex: options.source_face_index,
      },
      'prepared',
      [source.buffer, ...(reference ? [reference.buffer] : [])] as ArrayBuffer[],
    ),
    job.signal,
  );
}

function planOutput(job: Job, v: VideoStreamInfo): Plan {
  const { format } = job.options;
  const upright = v.rotation === 90 || v.rotation === 270;
  const width = upright ? v.height : v.width;
  const height = upright ? v.width : v.height;
  // mp4 keeps the target's rotation: frames are turned back to the stored orientation and the
  // tag is set in a remux (this ffmpeg drops a rotate tag given to an encoding run). WebM has no
  // rotation tag, so there the frames are stored upright.
  const keepRotation = v.rotation !== 0 && format === 'mp4';
  const encodedFile = path.join(job.dir, `encoded.${format}`);
  const outFile = keepRotation ? path.join(job.dir, `out.${format}`) : encodedFile;
  const maxFrames = maxFramesFor(job.limit);
  return { width, height, frameBytes: width * height * 3, maxFrames, keepRotation, encodedFile, outFile };
}

/** The decoder (target → raw frames) and the encoder (raw frames + soundtrack → encodedFile). */
function startCoders(job: Job, input: Inputs, plan: Plan): Coders {
  const { bins, options, signal } = job;
  const { targetFile, audioFile, audioCodec, v } = input;
  const decoder = spawnPiped(bins.ffmpeg, ['-v', 'error', '-nostdin', ...rawFramesOutput(targetFile)], signal);
  decoder.child.stdin.end();
  // The soundtrack comes from the `audio` slot, else from the target itself (copied when the
  // container allows, so it stays bit-exact).
  const soundFile = audioFile ?? (audioCodec ? targetFile : undefined);
  const encoder = spawnPiped(
    bins.ffmpeg,
    [
      '-v',
      'error',
      '-y',
      ...rawFramesInput(plan.width, plan.height, v.rate),
      ...(soundFile ? ['-i', soundFile, '-map', '0:v:0', '-map', '1:a:0'] : ['-map', '0:v:0']),
      ...(plan.keepRotation ? unrotate(v.rotation) : []),
      ...videoArgs(options.format, options.quality),
      ...(soundFile ? audioArgs(options.format, audioCodec!) : []),
      ...(audioFile ? ['-shortest'] : []),
      ...containerArgs(options.format),
      plan.encodedFile,
    ],
    signal,
  );
  return { decoder, encoder };
}

/** The tracker, whose detection and landmark nets run on the models thread. */
function createTracker(job: Job, prepared: Prepared, v: VideoStreamInfo, frameBytes: number): FaceTracker {
  const { call, options } = job;
  // Key frames go to the models thread through one shared buffer (the tracker awaits each detection).
  const keyFrame = new Uint8Array(new SharedArrayBuffer(frameBytes));
  const detectOn = async (frame: RgbImage, precise: boolean) => {
    keyFrame.set(frame.data);
    const task: VideoTask = {
      kind: 'detect',
      frame: { ...frame, data: keyFrame },
      minConfidence: options.min_confidence,
      descriptors: false,
      precise,
    };
    return (await call(task, 'faces')).faces;
  };
  return new FaceTracker(
    {
      detect: (frame) => detectOn(frame, false),
      detectPrecise: (frame) => detectOn(frame, true),
      landmarks: async (crop: RgbImage, box: Box) =>
        (await call({ kind: 'landmarks', crop, boxes: [box] }, 'landmarks', [crop.data.buffer as ArrayBuffer]))
          .landmarks[0]!,
      descriptor: async (crop: RgbImage, landmarks: Point[]) =>
        (await call({ kind: 'descriptor', crop, landmarks }, 'descriptor', [crop.data.buffer as ArrayBuffer]))
          .descriptor,
    },
    {
      mode: job.mode,
      reference: prepared.reference,
      matchThreshold: options.match_threshold,
      keyInterval: Math.max(1, Math.round(v.fps * KEY_FRAME_SECONDS)),
      fps: v.fps,
      maxFaces: MAX_FACES,
      indices: options.target_face_indices,
    },
  );
}

/** What every swap of a job sends: the source face, and the pool of face-region buffers. */
interface SwapSource {
  image: RgbImage;
  prepared: Prepared;
  regions: BufferPool;
}

/**
 * The guard's zones (guard.ts) on a frame, as the image swap has them: the faces the last detection
 * found unfollowed (box and outline; they move no further than a key frame's distance) and every
 * followed face's outline. Each swap keeps out of all but its own face. Undefined when there is no
 * other face than the one swapped (the swap then skips the guard).
 */
function zonesOf(faces: readonly FrameFace[], others: readonly OtherFace[]): Point[][] | undefined {
  if (others.length === 0 && faces.length <= 1) return undefined;
  const outline = (lm: readonly Point[]) => extendForehead(lm, DEFAULT_TUNING.forehead);
  return [...others.flatMap((o) => [boxZone(o.box), outline(o.landmarks)]), ...faces.map((f) => outline(f.landmarks))];
}

/**
 * Sends a frame's face region to a swap thread, for the faces the swap takes (`faces` minus the
 * refused ones, all of which the guard keeps out of); a frame with none passes through untouched.
 */
function startSwap(job: Job, src: SwapSource, frame: RgbImage, faces: FrameFace[], others: OtherFace[]): Pending {
  const swapping = faces.filter((f) => !f.refused);
  if (swapping.length === 0) return { done: Promise.resolve({ frame, stats: [] }), tracks: [] };
  // Only the faces' region travels to the swap thread and back.
  const r = swapRegion(
    swapping.map((f) => f.landmarks),
    frame.width,
    frame.height,
  );
  const part = cropFrame(frame, r, src.regions.take(r.width * r.height * 3));
  const keepOut = zonesOf(faces, others)?.map((z) => shiftPoints(z, -r.left, -r.top));
  const done = job
    .call(
      {
        kind: 'swap',
        frame: part,
        faces: swapping.map((f) => ({ landmarks: shiftPoints(f.landmarks, -r.left, -r.top), stats: f.track.stats })),
        keepOut,
        source: src.image,
        srcLandmarks: src.prepared.source.landmarks,
        blend: job.options.blend,
        colorCorrection: job.options.color_correction,
      },
      'swapped',
      [part.data.buffer as ArrayBuffer],
    )
    .then((reply) => {
      pasteFrame(frame, reply.frame, r);
      src.regions.give(reply.frame.data);
      return { frame, stats: reply.stats };
    });
  done.catch(() => {});
  return { done, tracks: swapping.map((f) => f.track) };
}

/** Waits for the oldest frame in flight, updates its faces' colour statistics and encodes it. */
async function flushFrame(p: Pending, encoder: SpawnedProcess, frames: BufferPool, signal: AbortSignal): Promise<void> {
  const out = await abortable(p.done, signal);
  p.tracks.forEach((t, k) => {
    const s = out.stats[k];
    if (s) t.stats = blendStats(t.stats, s, STATS_EMA);
  });
  await writeFrame(encoder.child.stdin, out.frame.data, () => frames.give(out.frame.data));
}

/** What became of a job's frames. */
interface Counts {
  decoded: number;
  /** Frames with a face swapped. */
  swapped: number;
  /** Frames with a followed face left as it is (refused there), and the first such refusal. */
  left: number;
  refusal?: { reason: Refusal; box: Box } | undefined;
}

/** Decodes, tracks, swaps and encodes every frame; counts what became of them. */
async function swapFrames(
  job: Job,
  coders: Coders,
  plan: Plan,
  steps: { tracker: FaceTracker; prepared: Prepared; total: number },
): Promise<Counts> {
  const { signal } = job;
  const { tracker } = steps;
  // Swaps run concurrently, but frames leave in order: a window of in-flight frames.
  const window = job.threads * 2 + 1;
  // Frames go back to their pool once the encoder has them; face regions once pasted back.
  // Besides those, HOLD measured intervals' frames wait for their verdicts (hold.ts).
  const frames = new BufferPool(window + HOLD * MEASURE_EVERY + 2);
  const src = {
    image: sharedImage(steps.prepared.source.image),
    prepared: steps.prepared,
    regions: new BufferPool(window + 2, 0.25),
  };
  const pending: Pending[] = [];
  const flushOne = () => flushFrame(pending.shift()!, coders.encoder, frames, signal);
  const counts: Counts = { decoded: 0, swapped: 0, left: 0 };
  const submit = async (ready: ReadyFrame[]) => {
    for (const { frame, faces, others } of ready) {
      count(counts, faces, tracker);
      pending.push(startSwap(job, src, frame, faces, others));
      while (pending.length >= window) await flushOne();
    }
  };
  const hold = new VerdictHold();
  // The frames since the last measured one, and a measured frame with them once analysed.
  let held: MeasuredFrame['held'] = [];
  const measured = async (frame: RgbImage, at: number): Promise<MeasuredFrame> => {
    const tracks = await abortable(tracker.analyse(frame, at), signal);
    const faces = new Map(tracks.map((t) => [t, { landmarks: t.smooth, refused: t.refused }]));
    const m = { frame, index: at, faces, others: tracker.others, held };
    held = [];
    return m;
  };
  let index = 0;
  try {
    for await (const data of readFrames(coders.decoder.child.stdout, plan.frameBytes, frames)) {
      signal.throwIfAborted();
      if (index >= plan.maxFrames) {
        throw new JobError('invalid_media', `input.target: more than ${plan.maxFrames} frames, over the frame limit`);
      }
      const frame: RgbImage = { data, width: plan.width, height: plan.height };
      // Every frame: the worker writes at most one update per 500 ms.
      job.ctx.progress('swapping faces', { current: index + 1, total: Math.max(steps.total, index + 1) });
      if (tracker.measures(index)) await submit(hold.push(await measured(frame, index)));
      else held.push({ frame, index });
      index++;
    }
    // Frames held at the end have no measured frame after them: measured now, in order.
    for (const h of held.splice(0)) await submit(hold.push(await measured(h.frame, h.index)));
    await submit(hold.flush());
    while (pending.length > 0) await flushOne();
    coders.encoder.child.stdin.end();
  } catch (err) {
    signal.throwIfAborted();
    if (err instanceof JobError) throw err;
    // A dead encoder shows up as a closed pipe: report the encoder's own error instead.
    await coders.encoder.done.catch((e: unknown) => {
      throw e;
    });
    throw err;
  }
  return { ...counts, decoded: index };
}

/** Counts a frame: swapped (a face taken) and/or with a face left as it is (the first refusal kept). */
function count(counts: Counts, faces: readonly FrameFace[], tracker: FaceTracker): void {
  if (faces.some((f) => !f.refused)) counts.swapped++;
  const refused = faces.find((f) => f.refused);
  if (!refused) return;
  counts.left++;
  counts.refusal ??= { reason: refused.refused!, box: tracker.boxOf(refused.track) };
}

/** Waits for both ffmpeg processes; a failing decoder means the target is not a decodable video. */
async function finishCoders(coders: Coders, signal: AbortSignal): Promise<void> {
  try {
    await coders.decoder.done;
  } catch (err) {
    signal.throwIfAborted();
    throw new JobError(
      'invalid_media',
      `input.target: not a decodable video (${(err as FfmpegError).stderr.trim().split('\n').pop() ?? ''})`,
    );
  }
  await coders.encoder.done;
}

/**
 * A video with no frame, or with no face swapped in any frame, is the caller's error: the refusal of
 * the face followed, as the image swap fails (profile.ts), when it was refused in every frame.
 */
function checkSwapped(job: Job, counts: Counts, tracker: FaceTracker): void {
  if (counts.decoded === 0) throw new JobError('invalid_media', 'input.target: no video frames could be decoded');
  if (counts.swapped > 0) return;
  if (counts.refusal) throw refusalError(counts.refusal.reason, counts.refusal.box, 'input.target');
  if (job.mode === 'reference' && tracker.sawFace) {
    const d = Number.isFinite(tracker.closestReference) ? tracker.closestReference.toFixed(2) : 'n/a';
    throw new JobError(
      'invalid_media',
      `input.reference: no face in input.target matches the reference face (closest distance ${d}, match_threshold ${job.options.match_threshold})`,
    );
  }
  throw new JobError('invalid_media', 'input.target: no face found in any frame');
}

/** The last stage's name, saying in how many frames a face was left as it is (refused there). */
export function encodingStage(counts: Pick<Counts, 'decoded' | 'left'>): string {
  if (counts.left === 0) return 'encoding';
  return `encoding (a face left as it is in ${counts.left} of ${counts.decoded} frames: in profile or too small to swap)`;
}

/** Sets the target's rotation tag on the encoded mp4 in a remux. */
async function restoreRotation(job: Job, plan: Plan, rotation: number): Promise<void> {
  // This ffmpeg writes `rotate=N` as a display matrix that ffprobe reads back as N degrees
  // counter-clockwise, i.e. (360 - N) clockwise: write the complement of the clockwise angle.
  const tag = String((360 - rotation) % 360);
  await runToEnd(
    job.bins.ffmpeg,
    [
      '-v',
      'error',
      '-y',
      '-i',
      plan.encodedFile,
      '-map',
      '0',
      '-c',
      'copy',
      '-metadata:s:v:0',
      `rotate=${tag}`,
      ...containerArgs('mp4'),
      plan.outFile,
    ],
    job.signal,
  );
}

/** One job in its workspace: inputs, source face, frames swapped through the two pipes, result. */
async function swapVideo(job: Job): Promise<ProcessorResult> {
  const input = await readInputs(job);
  job.ctx.progress('detecting faces');
  const prepared = await prepareFaces(job);
  const plan = planOutput(job, input.v);
  const coders = startCoders(job, input, plan);
  const tracker = createTracker(job, prepared, input.v, plan.frameBytes);
  const counts = await swapFrames(job, coders, plan, { tracker, prepared, total: input.v.frames });
  await finishCoders(coders, job.signal);
  checkSwapped(job, counts, tracker);
  job.ctx.progress(encodingStage(counts), { percent: null });
  if (plan.keepRotation) await restoreRotation(job, plan, input.v.rotation);
  return videoResult(plan.outFile, job.options.format);
}

/** What the job type says about itself (the API lists it). */
const DESCRIPTION = {
  name: VIDEO_FACE_SWAP,
  description:
    'Replaces a face throughout the `target` video with the face from the `source` image. Faces are ' +
    'tracked from frame to frame and their landmarks smoothed over time; frames without a face pass ' +
    "through untouched; the target's soundtrack is kept as it is (or replaced by `audio`).",
  slots: {
    source: { required: true, min: 1, max: 1, accepts: 'image', description: 'The face to put in (an image).' },
    target: {
      required: true,
      min: 1,
      max: 1,
      accepts: 'video',
      description:
        'The video to change (mp4, mov, webm, mkv). The result keeps its frame rate, size, duration and rotation.',
    },
    reference: {
      required: false,
      min: 1,
      max: 1,
      accepts: 'image',
      description: 'A picture of the person in `target` whose face is to be replaced. Implies `faces: reference`.',
    },
    audio: {
      required: false,
      min: 1,
      max: 1,
      accepts: 'audio',
      description: "A soundtrack to use instead of the target's (cut to the video's length).",
    },
  },
  models: [
    {
      name: MODEL_WARP_BLEND_TRACK_V1,
      description:
        'warp-blend-v1 per frame (face-api landmarks, Delaunay warp, CIELAB colour transfer, Poisson blending) ' +
        'with key-frame detection, landmark tracking, One-Euro smoothing and time-averaged colour statistics. CPU only.',
    },
  ],
  options: videoFaceSwapOptionsSchema,
} satisfies Omit<VideoFaceSwapJobType, 'run' | 'checkInput' | 'warmup' | 'close'>;

export function createVideoFaceSwapJobType(opts: VideoFaceSwapJobTypeOptions = {}): VideoFaceSwapJobType {
  const threads = Math.max(1, Math.floor(opts.threads ?? 1));
  const limits = opts.limits ?? DEFAULT_VIDEO_LIMITS;
  // Created on first use: an API-only process that merely lists job types starts no threads. Only
  // one thread loads the face models (their tfjs heap is most of a thread's memory); tracking needs
  // a small share of the CPU, and its tasks never wait behind swaps.
  const location = workerBeside(import.meta.url);
  const threadLimits = { resourceLimits: { maxYoungGenerationSizeMb: YOUNG_GENERATION_MB } };
  const modelPool = lazyThreadPool<VideoTask, VideoReply>(location, 1, { kind: 'warmup', models: true }, threadLimits);
  const swapPool = lazyThreadPool<VideoTask, VideoReply>(
    location,
    threads,
    { kind: 'warmup', models: false },
    threadLimits,
  );

  const call: Call = async (task, kind, transfer = []) => {
    const pool = task.kind === 'swap' ? swapPool : modelPool;
    const reply = await pool.get().run(task, { transferList: transfer });
    if (reply.kind === 'job-error') throw new JobError(reply.errorType, reply.message);
    if (reply.kind !== kind) throw new Error(`unexpected worker reply ${reply.kind}`);
    return reply as Extract<VideoReply, { kind: typeof kind }>;
  };

  async function run(ctx: RunContext<VideoFaceSwapOptions>): Promise<ProcessorResult> {
    const request = checkRequest(ctx);
    const bins = opts.binaries?.() ?? resolveBinaries();
    const limit = durationLimit(limits, request.options.max_duration);
    return withWorkspace(ctx.signal, (dir, signal) =>
      swapVideo({ ctx, ...request, bins, limits, limit, dir, signal, call, threads }),
    );
  }

  return {
    ...DESCRIPTION,
    run,
    checkInput: checkFaceInput,
    warmup: async () => {
      // This thread transfers every frame region to a swap thread: see detachOnce.
      detachOnce();
      await Promise.all([modelPool.warmup(), swapPool.warmup()]);
    },
    close: async () => {
      await Promise.all([modelPool.close(), swapPool.close()]);
    },
  };
}
