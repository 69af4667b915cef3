/** video-from-image-audio end to end: real images, a real tone, ffmpeg, and the checks a client would make. */
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { JobError } from '../../src/errors.js';
import { createVideoFromImageAudioJobType } from '../../src/processors/video/from-image-audio.js';
import { videoFromImageAudioOptionsSchema } from '../../src/processors/video/options.js';
import type { FetchedMedia } from '../../src/processors/types.js';
import { landscape, portrait } from '../face-swap/fixtures.js';
import { audioHash, decodeFrames, makeTone, probe } from './fixtures.js';

const LONG = 120_000;
const jt = createVideoFromImageAudioJobType();

function ctx(images: Buffer[], audio: Buffer | undefined, options: Record<string, unknown> = {}) {
  const media: { source: FetchedMedia[]; audio?: FetchedMedia[] } = {
    source: images.map((bytes) => ({ url: 'https://example.com/i.jpg', bytes, mime: 'image/jpeg' })),
  };
  if (audio) media.audio = [{ url: 'https://example.com/a.m4a', bytes: audio, mime: 'audio/x-m4a' }];
  return {
    model: 'ffmpeg-h264-v1',
    options: videoFromImageAudioOptionsSchema.parse(options),
    media,
    signal: new AbortController().signal,
    progress: () => {},
  };
}

/** Mean absolute difference between a decoded frame and an image resized to the frame. */
async function diffTo(frame: Uint8Array, width: number, height: number, image: Buffer): Promise<number> {
  const ref = await sharp(image).resize(width, height, { fit: 'contain' }).raw().toBuffer();
  let s = 0;
  for (let i = 0; i < frame.length; i++) s += Math.abs(frame[i]! - ref[i]!);
  return s / frame.length;
}

describe('video-from-image-audio', () => {
  it(
    'makes an mp4 as long as the audio, with the audio copied bit-exact',
    async () => {
      const image = await portrait('brunette', 0.5);
      const tone = await makeTone(1.5);
      const out = await jt.run(ctx([image], tone));
      expect(out.contentType).toBe('video/mp4');
      const p = await probe(out.bytes);
      const v = p.streams.find((s) => s.codec_type === 'video')!;
      expect(v.codec_name).toBe('h264');
      expect([v.width, v.height]).toEqual([276, 276]);
      expect(Math.abs(Number(p.format.duration) - 1.5)).toBeLessThan(0.1);
      expect(Math.abs(Number(v.nb_read_frames) - 1.5 * 25)).toBeLessThanOrEqual(1);
      expect(await audioHash(out.bytes)).toBe(await audioHash(tone));
      const f = await decodeFrames(out.bytes);
      expect(await diffTo(f.frames.at(-1)!, f.width, f.height, image)).toBeLessThan(6);
    },
    LONG,
  );

  it(
    'shows a sequence of images in turn, with a waveform, as webm',
    async () => {
      const a = await portrait('brunette', 0.5);
      const b = await landscape(276, 276);
      const tone = await makeTone(2);
      const out = await jt.run(ctx([a, b], tone, { format: 'webm', waveform: true, fps: 10 }));
      expect(out.contentType).toBe('video/webm');
      const p = await probe(out.bytes);
      expect(p.streams.find((s) => s.codec_type === 'video')?.codec_name).toBe('vp9');
      expect(p.streams.find((s) => s.codec_type === 'audio')?.codec_name).toBe('opus');
      const f = await decodeFrames(out.bytes);
      expect(Math.abs(f.frames.length - 20)).toBeLessThanOrEqual(1);
      // Top three quarters: first image early on, second image at the end (the waveform is below).
      const top = (frame: Uint8Array) => frame.subarray(0, f.width * Math.floor(f.height * 0.7) * 3);
      const topOf = async (img: Buffer) =>
        (await sharp(img).resize(f.width, f.height, { fit: 'contain' }).raw().toBuffer()).subarray(
          0,
          f.width * Math.floor(f.height * 0.7) * 3,
        );
      const mad = (x: Uint8Array, y: Uint8Array) => {
        let s = 0;
        for (let i = 0; i < x.length; i++) s += Math.abs(x[i]! - y[i]!);
        return s / x.length;
      };
      const [ta, tb] = await Promise.all([topOf(a), topOf(b)]);
      expect(mad(top(f.frames[2]!), ta)).toBeLessThan(mad(top(f.frames[2]!), tb));
      expect(mad(top(f.frames.at(-2)!), tb)).toBeLessThan(mad(top(f.frames.at(-2)!), ta));
    },
    LONG,
  );

  it(
    'fails with invalid_media naming the slot for bad audio or images',
    async () => {
      const image = await portrait('brunette', 0.25);
      const tone = await makeTone(1);
      const bad = Buffer.from('definitely not audio '.repeat(100));
      let err = await jt.run(ctx([image], bad) as never).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(JobError);
      expect((err as JobError).message).toBe('input.audio: not a decodable media file');
      err = await jt.run(ctx([image, bad], tone) as never).catch((e: unknown) => e);
      expect((err as JobError).message).toBe('input.source[1]: not a decodable image');
      const short = createVideoFromImageAudioJobType({ limits: { maxSeconds: 0.5, maxPixels: 2e6 } });
      err = await short.run(ctx([image], tone) as never).catch((e: unknown) => e);
      expect((err as JobError).message).toBe('input.audio: 1 s long, over the 0.5 s limit');
    },
    LONG,
  );
});
