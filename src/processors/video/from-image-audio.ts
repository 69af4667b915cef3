/**
 * Job type `video-from-image-audio` (model `ffmpeg-h264-v1`): one image, or a sequence of images shown
 * in turn, plus an audio track → a video as long as the audio, optionally with a moving waveform (the
 * "audiogram" used to post podcasts and voice notes where only video plays). Images are decoded with
 * sharp and piped to ffmpeg as raw frames, one per image, at a frame rate that spreads them over the
 * audio's length; ffmpeg repeats each as needed for the output frame rate.
 */
import path from 'node:path';
import sharp from '../sharp.js';
import { JobError } from '../../errors.js';
import type { FetchedMedia, JobType, ProcessorResult, RunContext } from '../types.js';
import {
  audioArgs,
  checkDuration,
  containerArgs,
  durationLimit,
  mp,
  rawFramesInput,
  slotFile,
  videoArgs,
  videoResult,
  withWorkspace,
} from './encode.js';
import { FfmpegError, resolveBinaries, spawnPiped, type FfmpegBinaries, type SpawnedProcess } from './ffmpeg.js';
import { writeFrame } from './frames.js';
import {
  DEFAULT_VIDEO_LIMITS,
  MODEL_FFMPEG_V1,
  VIDEO_FROM_IMAGE_AUDIO,
  videoFromImageAudioOptionsSchema,
  type VideoFromImageAudioOptions,
  type VideoLimits,
} from './options.js';
import { probeMedia } from './probe.js';

const MAX_IMAGES = 50;
const DEFAULT_MAX_WIDTH = 1920;

export interface VideoFromImageAudioJobTypeOptions {
  limits?: VideoLimits;
  /** ffmpeg/ffprobe to run (default: FFMPEG_PATH/FFPROBE_PATH, else the npm-shipped builds), resolved per job. */
  binaries?: () => FfmpegBinaries;
}

const even = (n: number) => Math.max(2, Math.round(n / 2) * 2);

/** One job's run: its request and its workspace. */
interface Job {
  ctx: RunContext<VideoFromImageAudioOptions>;
  options: VideoFromImageAudioOptions;
  images: FetchedMedia[];
  bins: FfmpegBinaries;
  limits: VideoLimits;
  /** The job's duration limit in seconds. */
  limit: number;
  dir: string;
  signal: AbortSignal;
}

const labelOf = (images: FetchedMedia[], i: number) => (images.length > 1 ? `input.source[${i}]` : 'input.source');

/** The request's model, options and required slots, checked before any file is written. */
function checkRequest(ctx: RunContext<VideoFromImageAudioOptions>) {
  if (ctx.model !== MODEL_FFMPEG_V1) throw new Error(`unknown model ${ctx.model} for ${VIDEO_FROM_IMAGE_AUDIO}`);
  const options = videoFromImageAudioOptionsSchema.parse(ctx.options);
  const images = ctx.media.source ?? [];
  if (images.length === 0) throw new JobError('invalid_media', 'input.source: required');
  if (!ctx.media.audio?.[0]) throw new JobError('invalid_media', 'input.audio: required');
  return { options, images };
}

/** Writes the audio into the workspace and probes it: its file, codec and duration within the limit. */
async function readAudio(job: Job): Promise<{ audioFile: string; codec: string; duration: number }> {
  const { ctx, signal } = job;
  const audioFile = (await slotFile(job.dir, ctx.media.audio, 'audio'))!;
  ctx.progress('reading audio');
  const info = await probeMedia(job.bins.ffprobe, audioFile, 'input.audio', signal);
  if (!info.audio) throw new JobError('invalid_media', 'input.audio: no audio stream');
  const duration = info.audio.duration || info.duration;
  if (!(duration > 0)) throw new JobError('invalid_media', 'input.audio: no audio stream');
  checkDuration('input.audio', duration, job.limit, job.limits);
  return { audioFile, codec: info.audio.codec, duration };
}

/** Frame size: the first image's, at `width` (or at most 1920 wide), even for yuv420p. */
async function frameSize(job: Job): Promise<{ width: number; height: number }> {
  const { images, options, limits } = job;
  let first: sharp.Metadata;
  try {
    first = await sharp(images[0]!.bytes, { limitInputPixels: false }).metadata();
  } catch {
    throw new JobError('invalid_media', `${labelOf(images, 0)}: not a decodable image`);
  }
  if (!first.width || !first.height)
    throw new JobError('invalid_media', `${labelOf(images, 0)}: not a decodable image`);
  const upright = (first.orientation ?? 1) >= 5;
  const [w0, h0] = upright ? [first.height, first.width] : [first.width, first.height];
  const width = even(options.width ?? Math.min(w0, DEFAULT_MAX_WIDTH));
  const height = even((width * h0) / w0);
  if (width * height > limits.maxPixels) {
    throw new JobError(
      'invalid_media',
      `${labelOf(images, 0)}: output would be ${width}x${height}, over the ${mp(limits.maxPixels)} MP limit`,
    );
  }
  return { width, height };
}

/** The encoder's mapping: the frames at the output rate, or with the waveform drawn over their bottom quarter. */
function graphArgs(options: VideoFromImageAudioOptions, width: number, height: number): string[] {
  if (!options.waveform) return ['-map', '0:v:0', '-map', '1:a:0', '-r', String(options.fps)];
  return [
    '-filter_complex',
    `[1:a]showwaves=s=${width}x${even(height / 4)}:mode=cline:rate=${options.fps}:colors=${options.waveform_color.replace('#', '0x')},format=rgba[w];` +
      `[0:v]fps=${options.fps}[bg];[bg][w]overlay=0:${height - even(height / 4)}:shortest=1,format=yuv420p[v]`,
    '-map',
    '[v]',
    '-map',
    '1:a:0',
  ];
}

/** Decodes each image to raw frames of the video's size and writes it to the encoder. */
async function writeImages(job: Job, encoder: SpawnedProcess, width: number, height: number): Promise<void> {
  const { images, signal } = job;
  for (let i = 0; i < images.length; i++) {
    signal.throwIfAborted();
    let raw: Buffer;
    try {
      raw = await sharp(images[i]!.bytes, { limitInputPixels: 100_000_000 })
        .rotate()
        .resize(width, height, { fit: 'contain', background: '#000000' })
        .flatten({ background: '#000000' })
        .toColourspace('srgb')
        .raw()
        .toBuffer();
    } catch {
      throw new JobError('invalid_media', `${labelOf(images, i)}: not a decodable image`);
    }
    await writeFrame(encoder.child.stdin, raw);
  }
}

/** One job in its workspace: audio, frame size, the images piped to the encoder, result. */
async function makeVideo(job: Job): Promise<ProcessorResult> {
  const { options, images, signal } = job;
  const audio = await readAudio(job);
  const { width, height } = await frameSize(job);
  if (images.length > MAX_IMAGES) throw new JobError('invalid_media', `input.source: at most ${MAX_IMAGES} images`);

  job.ctx.progress('encoding');
  const outFile = path.join(job.dir, `out.${options.format}`);
  // n images over `duration` seconds: the raw input runs at n/duration frames per second.
  const inRate = `${images.length * 1000}/${Math.round(audio.duration * 1000)}`;
  const encoder = spawnPiped(
    job.bins.ffmpeg,
    [
      '-v',
      'error',
      '-y',
      ...rawFramesInput(width, height, inRate),
      '-i',
      audio.audioFile,
      ...graphArgs(options, width, height),
      ...videoArgs(options.format, options.quality, { still: !options.waveform }),
      ...audioArgs(options.format, audio.codec),
      '-t',
      audio.duration.toFixed(3),
      ...containerArgs(options.format),
      outFile,
    ],
    signal,
  );
  try {
    await writeImages(job, encoder, width, height);
    // The last image is held to the end: one more copy of it closes the final interval.
    encoder.child.stdin.end();
    await encoder.done;
  } catch (err) {
    signal.throwIfAborted();
    if (err instanceof JobError) throw err;
    if (err instanceof FfmpegError)
      throw new Error(`encoding failed: ${err.stderr.trim().split('\n').pop() ?? err.message}`, { cause: err });
    throw err;
  }
  return videoResult(outFile, options.format);
}

/** What the job type says about itself (the API lists it). */
const DESCRIPTION = {
  name: VIDEO_FROM_IMAGE_AUDIO,
  description:
    'Makes a video from a still image (or a sequence of images shown in turn) and an audio track, as long ' +
    'as the audio: the "audiogram" for posting a podcast clip or a voice note where only video plays. ' +
    'Optionally draws the sound as a moving waveform.',
  slots: {
    source: {
      required: true,
      min: 1,
      max: MAX_IMAGES,
      accepts: 'image',
      description: 'The picture, or pictures shown one after another for equal shares of the audio.',
    },
    audio: {
      required: true,
      min: 1,
      max: 1,
      accepts: 'audio',
      description: 'The soundtrack (mp3, m4a/AAC, wav, ogg, flac…); kept as it is when the container allows.',
    },
  },
  models: [
    {
      name: MODEL_FFMPEG_V1,
      description: 'ffmpeg: H.264 (stillimage tuning) or VP9, audio copied when the container takes it.',
    },
  ],
  options: videoFromImageAudioOptionsSchema,
} satisfies Omit<JobType<typeof videoFromImageAudioOptionsSchema>, 'run'>;

export function createVideoFromImageAudioJobType(
  opts: VideoFromImageAudioJobTypeOptions = {},
): JobType<typeof videoFromImageAudioOptionsSchema> {
  const limits = opts.limits ?? DEFAULT_VIDEO_LIMITS;

  async function run(ctx: RunContext<VideoFromImageAudioOptions>): Promise<ProcessorResult> {
    const request = checkRequest(ctx);
    const bins = opts.binaries?.() ?? resolveBinaries();
    const limit = durationLimit(limits, request.options.max_duration);
    return withWorkspace(ctx.signal, (dir, signal) => makeVideo({ ctx, ...request, bins, limits, limit, dir, signal }));
  }

  return { ...DESCRIPTION, run };
}
