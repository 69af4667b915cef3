/**
 * video-face-swap end to end on real videos built with ffmpeg from the sample photographs: identity on
 * sampled frames (face-api descriptors), background untouched, soundtrack bit-exact, frame count and
 * duration kept, cancellation, and the invalid_media failures. No timing assertions.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  computeDescriptor,
  descriptorDistance,
  detectFaces,
  detectLandmarks,
  leftToRight,
} from '../../src/processors/face-swap/detect.js';
import { decodeImage } from '../../src/processors/face-swap/image.js';
import type { Box, RgbImage } from '../../src/processors/face-swap/types.js';
import { createVideoFaceSwapJobType, type VideoFaceSwapJobType } from '../../src/processors/video/face-swap.js';
import { videoFaceSwapOptionsSchema } from '../../src/processors/video/options.js';
import type { ProgressAt, RunContext } from '../../src/processors/types.js';
import { landscape, portrait } from '../face-swap/fixtures.js';
import { audioHash, decodeFrames, errorOf, makeClip, makeTone, media, probe } from './fixtures.js';

const LONG = 300_000;

/** A progress report as one line ("swapping faces: frame 3 of 50"), for assertions. */
const line = (stage: string, at?: ProgressAt): string =>
  at?.current === undefined ? stage : `${stage}: frame ${at.current} of ${at.total ?? '?'}`;

function context(
  slots: { source?: Buffer; target?: Buffer; reference?: Buffer; audio?: Buffer },
  options: Record<string, unknown> = {},
) {
  const abort = new AbortController();
  const stages: string[] = [];
  const m: RunContext<unknown>['media'] = {};
  if (slots.source) m.source = media(slots.source, 'image/jpeg');
  if (slots.target) m.target = media(slots.target, 'video/mp4');
  if (slots.reference) m.reference = media(slots.reference, 'image/jpeg');
  if (slots.audio) m.audio = media(slots.audio, 'audio/x-m4a');
  return {
    abort,
    stages,
    ctx: {
      model: 'warp-blend-track-v1',
      options: videoFaceSwapOptionsSchema.parse(options),
      media: m,
      signal: abort.signal,
      progress: (s: string, at?: ProgressAt): void => void stages.push(line(s, at)),
    },
  };
}

const frameImage = (f: { width: number; height: number; frames: Uint8Array[] }, i: number): RgbImage => ({
  data: f.frames[i]!,
  width: f.width,
  height: f.height,
});

/** Mean absolute difference of two frames over a box (clipped to the frame). */
function meanDiffBox(a: RgbImage, b: RgbImage, box: Box): number {
  const x0 = Math.max(0, Math.floor(box.x));
  const y0 = Math.max(0, Math.floor(box.y));
  const x1 = Math.min(a.width, Math.ceil(box.x + box.width));
  const y1 = Math.min(a.height, Math.ceil(box.y + box.height));
  let sum = 0;
  for (let y = y0; y < y1; y++) {
    for (let x = x0; x < x1; x++) {
      const o = (y * a.width + x) * 3;
      for (let c = 0; c < 3; c++) sum += Math.abs(a.data[o + c]! - b.data[o + c]!);
    }
  }
  return sum / Math.max(1, (x1 - x0) * (y1 - y0) * 3);
}

/**
 * The job's temp dirs, under a TMPDIR of this test's own (set around the run): other test files and
 * benchmarks running beside it make media-jobs-video-* dirs in the shared one.
 */
const tempDirs = (dir: string) => readdirSync(dir).filter((n) => n.startsWith('media-jobs-video-'));

describe('video-face-swap', () => {
  let jt: VideoFaceSwapJobType;
  let clip: Buffer;
  let source: Buffer;
  let out: Buffer;
  let stages: string[];

  beforeAll(async () => {
    jt = createVideoFaceSwapJobType({ threads: 2 });
    [clip, source] = await Promise.all([makeClip(), portrait('curlyBlonde')]);
    const run = context({ source, target: clip });
    stages = run.stages;
    out = (await jt.run(run.ctx)).bytes;
  }, LONG);
  afterAll(() => jt?.close());

  it('keeps frame count, frame rate, size and duration, and copies the soundtrack bit-exact', async () => {
    const [a, b] = await Promise.all([probe(clip), probe(out)]);
    const va = a.streams.find((s) => s.codec_type === 'video')!;
    const vb = b.streams.find((s) => s.codec_type === 'video')!;
    expect(vb.codec_name).toBe('h264');
    expect(vb.nb_read_frames).toBe(va.nb_read_frames);
    expect(vb.r_frame_rate).toBe(va.r_frame_rate);
    expect([vb.width, vb.height]).toEqual([va.width, va.height]);
    expect(Math.abs(Number(vb.duration) - Number(va.duration))).toBeLessThan(0.041);
    expect(b.streams.find((s) => s.codec_type === 'audio')?.codec_name).toBe('aac');
    expect(await audioHash(out)).toBe(await audioHash(clip));
    expect(stages.some((s) => /^swapping faces: frame \d+ of 50$/.test(s))).toBe(true);
    // A frontal face throughout: never left as it is (the stage would say in how many frames).
    expect(stages).toContain('encoding');
  });

  it(
    'puts the source identity on sampled frames and leaves the background alone',
    async () => {
      const [before, after] = await Promise.all([decodeFrames(clip), decodeFrames(out)]);
      expect(after.frames.length).toBe(before.frames.length);
      const src = await decodeImage(source, 'source', 1e9);
      const srcDesc = (await detectFaces(src, { descriptors: true }))[0]!.descriptor!;
      for (const i of [3, 24, 46]) {
        const b = frameImage(before, i);
        const a = frameImage(after, i);
        const face = (await detectFaces(b, { descriptors: true }))[0]!;
        const swapped = await computeDescriptor(a, await detectLandmarks(a, face.box));
        const toSource = descriptorDistance(swapped, srcDesc);
        const toOriginal = descriptorDistance(swapped, face.descriptor!);
        expect(toSource).toBeLessThan(toOriginal);

        // Outside the face (its box grown by 40% each side) only the re-encoding differs.
        const g = 0.4;
        const keep: Box = {
          x: face.box.x - g * face.box.width,
          y: face.box.y - g * face.box.height,
          width: face.box.width * (1 + 2 * g),
          height: face.box.height * (1 + 2 * g),
        };
        let outside = 0;
        let n = 0;
        let inside = 0;
        let m = 0;
        for (let y = 0; y < b.height; y++) {
          for (let x = 0; x < b.width; x++) {
            const o = (y * b.width + x) * 3;
            const d =
              (Math.abs(a.data[o]! - b.data[o]!) +
                Math.abs(a.data[o + 1]! - b.data[o + 1]!) +
                Math.abs(a.data[o + 2]! - b.data[o + 2]!)) /
              3;
            const inKeep = x >= keep.x && x < keep.x + keep.width && y >= keep.y && y < keep.y + keep.height;
            const inFace =
              x >= face.box.x && x < face.box.x + face.box.width && y >= face.box.y && y < face.box.y + face.box.height;
            if (!inKeep) {
              outside += d;
              n++;
            } else if (inFace) {
              inside += d;
              m++;
            }
          }
        }
        expect(n).toBeGreaterThan(1000);
        expect(outside / n).toBeLessThan(2.5);
        expect(inside / m).toBeGreaterThan(8);
      }
    },
    LONG,
  );

  it(
    'replaces the soundtrack with the audio slot, cut to the video length',
    async () => {
      const short = await makeClip({ seconds: 1 });
      const tone = await makeTone(3);
      const run = context({ source, target: short, audio: tone });
      const res = await jt.run(run.ctx);
      const p = await probe(res.bytes);
      const v = p.streams.find((s) => s.codec_type === 'video')!;
      expect(v.nb_read_frames).toBe('25');
      const dur = Number(p.format.duration);
      expect(dur).toBeGreaterThan(0.95);
      expect(dur).toBeLessThan(1.1);
      expect(p.streams.find((s) => s.codec_type === 'audio')?.codec_name).toBe('aac');
      expect(await audioHash(res.bytes)).not.toBe(await audioHash(short));
    },
    LONG,
  );

  it(
    'keeps the rotation metadata and the stored orientation of a phone video',
    async () => {
      const rotated = await makeClip({ seconds: 1, rotate: 90 });
      const res = await jt.run(context({ source, target: rotated }).ctx);
      const [a, b] = await Promise.all([probe(rotated), probe(res.bytes)]);
      const va = a.streams.find((s) => s.codec_type === 'video')!;
      const vb = b.streams.find((s) => s.codec_type === 'video')!;
      expect([vb.width, vb.height]).toEqual([va.width, va.height]);
      const rot = (s: typeof va) => s.side_data_list?.find((d) => d.rotation !== undefined)?.rotation;
      expect(rot(va)).toBeDefined();
      expect(rot(vb)).toBe(rot(va));
      // Decoded upright, the swapped video matches the target outside the face and differs on it.
      const [fa, fb] = await Promise.all([decodeFrames(rotated), decodeFrames(res.bytes)]);
      expect([fb.width, fb.height]).toEqual([fa.width, fa.height]);
      const face = (await detectFaces(frameImage(fa, 10)))[0]!;
      expect(face).toBeDefined();
      const ua = frameImage(fa, 10);
      const ub = frameImage(fb, 10);
      let corner = 0;
      let inFace = 0;
      const fx = Math.round(face.box.x + face.box.width / 2);
      const fy = Math.round(face.box.y + face.box.height / 2);
      for (let y = 0; y < 20; y++) {
        for (let x = 0; x < 20; x++) {
          const o = (y * ua.width + x) * 3;
          corner += Math.abs(ua.data[o]! - ub.data[o]!);
          const p = ((fy - 10 + y) * ua.width + fx - 10 + x) * 3;
          inFace +=
            Math.abs(ua.data[p]! - ub.data[p]!) +
            Math.abs(ua.data[p + 1]! - ub.data[p + 1]!) +
            Math.abs(ua.data[p + 2]! - ub.data[p + 2]!);
        }
      }
      expect(corner / 400).toBeLessThan(4);
      expect(inFace / 1200).toBeGreaterThan(4);
    },
    LONG,
  );

  it(
    'cancels mid-video: rejects at once, kills ffmpeg and removes its temp files',
    async () => {
      const long = await makeClip({ seconds: 3 });
      const tmp = mkdtempSync(path.join(os.tmpdir(), 'cancel-test-'));
      const shared = process.env.TMPDIR;
      process.env.TMPDIR = tmp;
      const run = context({ source, target: long });
      let aborted = false;
      let during: string[] = [];
      const progress = run.ctx.progress;
      run.ctx.progress = (s: string, at?: ProgressAt) => {
        progress(s, at);
        const m = /frame (\d+)/.exec(line(s, at));
        if (m && Number(m[1]) >= 10 && !aborted) {
          aborted = true;
          during = tempDirs(tmp);
          run.abort.abort(new Error('cancelled by test'));
        }
      };
      try {
        await expect(jt.run(run.ctx as never)).rejects.toThrow('cancelled by test');
      } finally {
        if (shared === undefined) delete process.env.TMPDIR;
        else process.env.TMPDIR = shared;
      }
      expect(aborted).toBe(true);
      // No ffmpeg child left behind (they were SIGKILLed; give the kernel a moment to reap them).
      const deadline = Date.now() + 10_000;
      let children: string;
      do {
        try {
          children = execFileSync('ps', ['-o', 'comm=', '--ppid', String(process.pid)]).toString();
        } catch {
          children = '';
        }
        if (!children.includes('ffmpeg')) break;
        await new Promise((r) => setTimeout(r, 100));
      } while (Date.now() < deadline);
      expect(children).not.toContain('ffmpeg');
      expect(during).toHaveLength(1); // the job's dir was there (under this test's TMPDIR) ...
      expect(tempDirs(tmp)).toEqual([]); // ... and is gone
      rmSync(tmp, { recursive: true, force: true });
    },
    LONG,
  );

  it(
    'fails with invalid_media for a video with no face, naming the slot',
    async () => {
      const still = await makeClip({ seconds: 1, photo: 6, region: { left: 0, top: 1100, width: 480, height: 420 } });
      const err = await errorOf(jt.run(context({ source, target: still }).ctx));
      expect(err.errorType).toBe('invalid_media');
      expect(err.message).toBe('input.target: no face found in any frame');
    },
    LONG,
  );

  it(
    'with target_face_indices, follows exactly those faces of the first frame; a missing index fails clearly',
    async () => {
      // sample4's four faces, left to right as face-detect orders them.
      const group = await makeClip({
        seconds: 1,
        photo: 4,
        region: { left: 0, top: 0, width: 1920, height: 1448 },
        width: 960,
        height: 724,
        pan: 0.01,
      });
      const err = await errorOf(jt.run(context({ source, target: group }, { target_face_indices: [1, 5] }).ctx));
      expect(err.errorType).toBe('invalid_media');
      expect(err.message).toBe(
        'input.target: no face at index 5 (4 faces found on the first frame with a face, indices 0-3)',
      );

      const swapped = (await jt.run(context({ source, target: group }, { target_face_indices: [1, 3] }).ctx)).bytes;
      const [a, b] = await Promise.all([decodeFrames(group), decodeFrames(swapped)]);
      for (const i of [0, 10]) {
        const before = frameImage(a, i);
        const after = frameImage(b, i);
        const faces = leftToRight(await detectFaces(before));
        expect(faces).toHaveLength(4);
        const diff = faces.map((f) => meanDiffBox(before, after, f.box));
        expect(diff[1], `frame ${i} face 1`).toBeGreaterThan(4);
        expect(diff[3], `frame ${i} face 3`).toBeGreaterThan(4);
        // Faces 0 and 2 only carry re-encoding noise.
        expect(diff[0], `frame ${i} face 0`).toBeLessThan(2);
        expect(diff[2], `frame ${i} face 2`).toBeLessThan(2);
      }
    },
    LONG,
  );

  it(
    'fails with invalid_media for a source image with no face',
    async () => {
      const err = await errorOf(jt.run(context({ source: await landscape(400, 300), target: clip }).ctx));
      expect(err.message).toBe('input.source: no face found');
    },
    LONG,
  );

  it(
    'refuses over-limit and undecodable videos before decoding a frame',
    async () => {
      const small = createVideoFaceSwapJobType({ threads: 1, limits: { maxSeconds: 1, maxPixels: 100_000 } });
      try {
        let err = await errorOf(small.run(context({ source, target: clip }).ctx));
        expect(err.message).toBe('input.target: 2 s long, over the 1 s limit');
        err = await errorOf(jt.run(context({ source, target: clip }, { max_duration: 1.5 }).ctx));
        expect(err.message).toBe('input.target: 2 s long, over the 1.5 s max_duration');
        const tiny = createVideoFaceSwapJobType({ threads: 1, limits: { maxSeconds: 60, maxPixels: 50_000 } });
        err = await errorOf(tiny.run(context({ source, target: clip }).ctx));
        expect(err.message).toBe('input.target: video is 320x280 (0.09 MP), over the 0.05 MP limit');
        await tiny.close();
        err = await errorOf(
          jt.run(context({ source, target: Buffer.from('not a video at all, just text'.repeat(50)) }).ctx),
        );
        expect(err.message).toBe('input.target: not a decodable media file');
      } finally {
        await small.close();
      }
    },
    LONG,
  );
});
