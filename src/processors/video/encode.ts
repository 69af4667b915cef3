/** Shared parts of the video jobs: temp workspace, input checks, the encoder's arguments and the result. */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { JobError } from '../../errors.js';
import type { FetchedMedia, ProcessorResult } from '../types.js';
import { crfFor, MAX_FPS, type VideoFormat, type VideoLimits } from './options.js';
import type { MediaInfo, VideoStreamInfo } from './probe.js';

/**
 * Runs `fn` in a private temp directory, removed (with everything in it) whatever happened, with a
 * signal of its own for the processes it starts.
 */
export async function withWorkspace<T>(
  jobSignal: AbortSignal,
  fn: (dir: string, signal: AbortSignal) => Promise<T>,
): Promise<T> {
  // Our own controller, aborted on the job's signal and whenever run() ends: ffmpeg never outlives it.
  const ac = new AbortController();
  const onAbort = () => ac.abort(jobSignal.reason);
  jobSignal.addEventListener('abort', onAbort, { once: true });
  if (jobSignal.aborted) onAbort();
  try {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'media-jobs-video-'));
    try {
      return await fn(dir, ac.signal);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  } finally {
    ac.abort(new Error('job finished'));
    jobSignal.removeEventListener('abort', onAbort);
  }
}

/** Writes a slot's first file into the workspace (ffmpeg needs a seekable file for mp4/mov). */
export async function slotFile(
  dir: string,
  media: FetchedMedia[] | undefined,
  slot: string,
): Promise<string | undefined> {
  const first = media?.[0];
  if (!first) return undefined;
  const file = path.join(dir, `${slot}.in`);
  await writeFile(file, first.bytes);
  return file;
}

export function fmtSeconds(s: number): string {
  return `${Number(s.toFixed(s < 10 ? 2 : 1))} s`;
}

/** The duration limit of a job: the service's, or the job's own `max_duration` if lower. */
export function durationLimit(limits: VideoLimits, maxDuration: number | undefined): number {
  return Math.min(limits.maxSeconds, maxDuration ?? Infinity);
}

export function checkDuration(label: string, seconds: number, limit: number, limits: VideoLimits): void {
  if (seconds > limit + 1e-3) {
    const which = limit < limits.maxSeconds ? 'max_duration' : 'limit';
    throw new JobError(
      'invalid_media',
      `${label}: ${fmtSeconds(seconds)} long, over the ${fmtSeconds(limit)} ${which}`,
    );
  }
}

/** Checks a target video against the limits before a single frame is decoded. */
export function checkVideo(label: string, info: MediaInfo, limits: VideoLimits, limit: number): VideoStreamInfo {
  const v = info.video;
  if (!v) throw new JobError('invalid_media', `${label}: no video stream`);
  if (!(v.fps > 0) || v.fps > 1000) throw new JobError('invalid_media', `${label}: no usable frame rate`);
  checkDuration(label, info.duration, limit, limits);
  const px = v.width * v.height;
  if (px > limits.maxPixels) {
    throw new JobError(
      'invalid_media',
      `${label}: video is ${v.width}x${v.height} (${mp(px)} MP), over the ${mp(limits.maxPixels)} MP limit`,
    );
  }
  const maxFrames = maxFramesFor(limit);
  if (v.frames > maxFrames) {
    throw new JobError('invalid_media', `${label}: ${v.frames} frames, over the ${maxFrames} frame limit`);
  }
  return v;
}

/** Megapixels with two significant digits. */
export function mp(pixels: number): string {
  return String(Number((pixels / 1e6).toPrecision(2)));
}

export function maxFramesFor(limitSeconds: number): number {
  return Math.ceil(limitSeconds * MAX_FPS);
}

/** Audio codecs each container takes as they are (copied bit-exact); anything else is re-encoded. */
const COPYABLE: Record<VideoFormat, readonly string[]> = {
  mp4: ['aac', 'mp3', 'alac', 'ac3', 'eac3'],
  webm: ['opus', 'vorbis'],
};

export function audioArgs(format: VideoFormat, codec: string): string[] {
  if (COPYABLE[format].includes(codec)) return ['-c:a', 'copy'];
  return format === 'mp4' ? ['-c:a', 'aac', '-b:a', '160k'] : ['-c:a', 'libopus', '-b:a', '128k'];
}

export function videoArgs(format: VideoFormat, quality: number, opts: { still?: boolean } = {}): string[] {
  const crf = String(crfFor(format, quality));
  if (format === 'mp4') {
    return [
      '-c:v',
      'libx264',
      '-preset',
      'veryfast',
      '-crf',
      crf,
      '-pix_fmt',
      'yuv420p',
      ...(opts.still ? ['-tune', 'stillimage'] : []),
    ];
  }
  return [
    '-c:v',
    'libvpx-vp9',
    '-crf',
    crf,
    '-b:v',
    '0',
    '-deadline',
    'realtime',
    '-cpu-used',
    '8',
    '-row-mt',
    '1',
    '-pix_fmt',
    'yuv420p',
  ];
}

/** ffmpeg's input options for raw rgb24 frames of width x height piped to its stdin at `rate` frames per second. */
export function rawFramesInput(width: number, height: number, rate: string): string[] {
  return ['-f', 'rawvideo', '-pix_fmt', 'rgb24', '-s', `${width}x${height}`, '-framerate', rate, '-i', 'pipe:0'];
}

/** ffmpeg's input and output options that decode the first video stream of `file` to raw rgb24 frames on stdout. */
export function rawFramesOutput(file: string): string[] {
  return ['-i', file, '-map', '0:v:0', '-vsync', 'passthrough', '-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:1'];
}

export function containerArgs(format: VideoFormat): string[] {
  return format === 'mp4' ? ['-movflags', '+faststart', '-f', 'mp4'] : ['-f', 'webm'];
}

export const VIDEO_CONTENT_TYPES: Record<VideoFormat, string> = { mp4: 'video/mp4', webm: 'video/webm' };

/** The finished video file as the job's result. */
export async function videoResult(file: string, format: VideoFormat): Promise<ProcessorResult> {
  const bytes = await readFile(file);
  return { bytes, contentType: VIDEO_CONTENT_TYPES[format], extension: format };
}
