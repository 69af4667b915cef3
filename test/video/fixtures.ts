/**
 * Test videos made with ffmpeg from face-api's sample photographs: a slow pan over a photo with one
 * face, plus a sine-tone soundtrack. Short and small (2 s, 320x280, 25 fps) so the suite stays quick.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { expect } from 'vitest';
import { JobError } from '../../src/errors.js';
import { resolveBinaries, runToEnd } from '../../src/processors/video/ffmpeg.js';
import type { FetchedMedia } from '../../src/processors/types.js';
import { sample } from '../face-swap/fixtures.js';

export const bins = resolveBinaries();

export interface ClipSpec {
  /** Which sample photo, and the region the camera pans across (in photo pixels). */
  photo?: 1 | 2 | 3 | 4 | 5 | 6;
  region?: { left: number; top: number; width: number; height: number };
  seconds?: number;
  width?: number;
  height?: number;
  fps?: number;
  /** Pan distance over the clip, as a fraction of the output width. */
  pan?: number;
  audio?: 'sine' | 'none';
  /** Rotation tag to write (the pixels are stored rotated back, as a phone does). */
  rotate?: 0 | 90;
  format?: 'mp4' | 'webm' | 'mov';
  /** Temporal noise (ffmpeg's noise filter strength), as a camera sensor adds. */
  noise?: number;
}

/** sample6 around its brunette (right; the photo's largest face), with no other face in view. */
export const BRUNETTE_REGION = { left: 1440, top: 180, width: 480, height: 420 };

async function withDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'video-test-'));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export async function run(args: string[]): Promise<Buffer> {
  return runToEnd(bins.ffmpeg, ['-v', 'error', '-nostdin', ...args], new AbortController().signal);
}

/** Builds a clip; returns the file's bytes. */
export async function makeClip(spec: ClipSpec = {}): Promise<Buffer> {
  const { photo = 6, region = BRUNETTE_REGION, seconds = 2, width = 320, height = 280, fps = 25, pan = 0.08 } = spec;
  const format = spec.format ?? 'mp4';
  return withDir(async (dir) => {
    // Camera view is 90% of the region, panning right by `pan` of the width (in region pixels).
    const still = path.join(dir, 'still.png');
    await sharp(sample(photo)).extract(region).png().toFile(still);
    const cw = Math.round(region.width * 0.9);
    const ch = Math.round(region.height * 0.9);
    const dx = Math.round(region.width * pan);
    const vf =
      `crop=${cw}:${ch}:x='min(${region.width - cw},${dx}*t/${seconds})':y='${(region.height - ch) / 2}',scale=${width}:${height}` +
      (spec.noise ? `,noise=alls=${spec.noise}:allf=t` : '') +
      ',format=yuv420p' +
      (spec.rotate === 90 ? ',transpose=clock' : '');
    const out = path.join(dir, `clip.${format}`);
    const audio = spec.audio ?? 'sine';
    await run([
      '-loop',
      '1',
      '-framerate',
      String(fps),
      '-i',
      still,
      ...(audio === 'sine' ? ['-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=48000:duration=${seconds}`] : []),
      '-vf',
      vf,
      '-t',
      String(seconds),
      '-r',
      String(fps),
      ...(format === 'webm'
        ? ['-c:v', 'libvpx-vp9', '-deadline', 'realtime', '-cpu-used', '8', '-b:v', '1M']
        : ['-c:v', 'libx264', '-preset', 'veryfast', '-crf', '18', '-pix_fmt', 'yuv420p']),
      ...(audio === 'sine'
        ? format === 'webm'
          ? ['-c:a', 'libopus', '-b:a', '64k']
          : ['-c:a', 'aac', '-b:a', '96k']
        : []),
      '-y',
      out,
    ]);
    if (spec.rotate !== 90) return readFile(out);
    // As a phone stores a portrait video: pixels turned, plus a rotation tag (set by a remux).
    const tagged = path.join(dir, `tagged.${format}`);
    await run(['-i', out, '-map', '0', '-c', 'copy', '-metadata:s:v:0', 'rotate=90', '-y', tagged]);
    return readFile(tagged);
  });
}

/**
 * A silent clip (mp4, H.264) whose frame i is still `order[i]` of `stills` (pictures of the clip's
 * size), e.g. a face that turns to profile and back, cut from two photos.
 */
export async function makeSequence(stills: readonly Buffer[], order: readonly number[], fps = 25): Promise<Buffer> {
  return withDir(async (dir) => {
    await Promise.all(order.map((k, i) => writeFile(path.join(dir, `f${String(i).padStart(4, '0')}.png`), stills[k]!)));
    const out = path.join(dir, 'clip.mp4');
    const frames = path.join(dir, 'f%04d.png');
    await run([
      ...['-framerate', String(fps), '-i', frames],
      ...['-c:v', 'libx264', '-preset', 'veryfast', '-crf', '18', '-pix_fmt', 'yuv420p', '-y', out],
    ]);
    return readFile(out);
  });
}

/** Clip size of the stills below. */
export const STILL = { width: 320, height: 280 };

/**
 * A frontal face (sample6's brunette) and a profile (sample2's, which the swap refuses), each framed
 * about the same (in the middle; SSD finds the profile at 0.61) at STILL's size, as PNG: frames for makeSequence.
 */
export async function frontalAndProfile(): Promise<[Buffer, Buffer]> {
  const { width, height } = STILL;
  const still = (n: 2 | 6, left: number, top: number, w: number) =>
    sharp(sample(n))
      .extract({ left, top, width: w, height: Math.round((w * height) / width) })
      .resize(width, height)
      .png()
      .toBuffer();
  return Promise.all([still(6, 1359, 187, 478), still(2, 225, 91, 400)]);
}

/**
 * Two heads cheek to cheek (sample3's curly blonde and dark-haired woman, 8 px apart: the image
 * swap's neighbours test, with room around them so Tiny finds both) at 320x240, as PNG.
 */
export async function twoHeads(): Promise<Buffer> {
  const cut = (left: number, top: number, width: number) =>
    sharp(sample(3)).extract({ left, top, width, height: 480 }).png().toBuffer();
  const [a, b] = await Promise.all([cut(465, 180, 330), cut(1504, 140, 300)]);
  const both = await sharp({ create: { width: 638, height: 480, channels: 3, background: '#6a6a6a' } })
    .composite([
      { input: a, left: 0, top: 0 },
      { input: b, left: 338, top: 0 },
    ])
    .png()
    .toBuffer();
  return sharp(both).resize(320, 240).png().toBuffer();
}

/** A tone as an audio file of its own (m4a/AAC), for the `audio` slot. */
export async function makeTone(seconds: number, frequency = 660): Promise<Buffer> {
  return withDir(async (dir) => {
    const out = path.join(dir, 'tone.m4a');
    await run([
      '-f',
      'lavfi',
      '-i',
      `sine=frequency=${frequency}:sample_rate=44100:duration=${seconds}`,
      '-c:a',
      'aac',
      '-b:a',
      '96k',
      '-y',
      out,
    ]);
    return readFile(out);
  });
}

/** Writes bytes to a temp file for ffmpeg/ffprobe and runs `fn` on it. */
export async function withFile<T>(bytes: Buffer, fn: (file: string) => Promise<T>): Promise<T> {
  return withDir(async (dir) => {
    const file = path.join(dir, 'media');
    await writeFile(file, bytes);
    return fn(file);
  });
}

/** Decoded frames (rgb24, upright) of a video. */
export async function decodeFrames(bytes: Buffer): Promise<{ width: number; height: number; frames: Uint8Array[] }> {
  return withFile(bytes, async (file) => {
    const probe = JSON.parse(
      (
        await runToEnd(
          bins.ffprobe,
          ['-v', 'error', '-print_format', 'json', '-show_streams', '-select_streams', 'v:0', file],
          new AbortController().signal,
        )
      ).toString(),
    ) as {
      streams: {
        width: number;
        height: number;
        tags?: { rotate?: string };
        side_data_list?: { rotation?: number }[];
      }[];
    };
    const s = probe.streams[0]!;
    const rot = Math.abs(
      Number(s.tags?.rotate ?? s.side_data_list?.find((d) => d.rotation !== undefined)?.rotation ?? 0),
    );
    const [width, height] = rot === 90 || rot === 270 ? [s.height, s.width] : [s.width, s.height];
    const raw = await run([
      '-i',
      file,
      '-map',
      '0:v:0',
      '-vsync',
      'passthrough',
      '-f',
      'rawvideo',
      '-pix_fmt',
      'rgb24',
      'pipe:1',
    ]);
    const size = width * height * 3;
    const frames: Uint8Array[] = [];
    for (let o = 0; o + size <= raw.length; o += size) frames.push(new Uint8Array(raw.subarray(o, o + size)));
    return { width, height, frames };
  });
}

/** MD5 of the audio stream's packets (unchanged when the audio was copied, not re-encoded). */
export async function audioHash(bytes: Buffer): Promise<string> {
  return withFile(bytes, async (file) =>
    (await run(['-i', file, '-map', '0:a:0', '-c', 'copy', '-f', 'md5', '-'])).toString().trim(),
  );
}

export async function probe(bytes: Buffer) {
  return withFile(
    bytes,
    async (file) =>
      JSON.parse(
        (
          await runToEnd(
            bins.ffprobe,
            ['-v', 'error', '-count_frames', '-print_format', 'json', '-show_format', '-show_streams', file],
            new AbortController().signal,
          )
        ).toString(),
      ) as {
        format: { duration: string };
        streams: {
          codec_type: string;
          codec_name: string;
          nb_read_frames?: string;
          r_frame_rate: string;
          width?: number;
          height?: number;
          duration?: string;
          tags?: Record<string, string>;
          side_data_list?: { rotation?: number }[];
        }[];
      },
  );
}

export function media(bytes: Buffer, mime: string): FetchedMedia[] {
  return [{ url: 'https://example.com/input', bytes, mime }];
}

/** The JobError a job's run rejects with (the test fails if it resolves or rejects with anything else). */
export async function errorOf(p: Promise<unknown>): Promise<JobError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(JobError);
  return err as JobError;
}
