/**
 * video-face-swap refuses what the image swap refuses (profile.ts) and keeps the outline move out of
 * other faces (guard.ts), on clips cut from the sample photos: a face that turns to profile in some
 * frames is left as it is there, a source without visible eyes fails the job at once, a face picked
 * by index that is a profile fails as the image swap does, and a face swapped beside another leaves
 * the other's pixels alone.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectLandmarks, findFaces, leftToRight } from '../../src/processors/face-swap/detect.js';
import { convexHull } from '../../src/processors/face-swap/geometry.js';
import { decodeImage } from '../../src/processors/face-swap/image.js';
import { rasterizePolygon } from '../../src/processors/face-swap/mask.js';
import { extendForehead } from '../../src/processors/face-swap/swap.js';
import type { Box } from '../../src/processors/face-swap/types.js';
import { createVideoFaceSwapJobType, type VideoFaceSwapJobType } from '../../src/processors/video/face-swap.js';
import { videoFaceSwapOptionsSchema } from '../../src/processors/video/options.js';
import { portrait } from '../face-swap/fixtures.js';
import {
  decodeFrames,
  errorOf,
  frontalAndProfile,
  makeClip,
  makeSequence,
  media,
  STILL,
  twoHeads,
} from './fixtures.js';

const LONG = 300_000;

function context(source: Buffer, target: Buffer, options: Record<string, unknown> = {}) {
  const stages: string[] = [];
  return {
    stages,
    ctx: {
      model: 'warp-blend-track-v1',
      options: videoFaceSwapOptionsSchema.parse(options),
      media: { source: media(source, 'image/jpeg'), target: media(target, 'video/mp4') },
      signal: new AbortController().signal,
      progress: (s: string): void => {
        if (stages.at(-1) !== s) stages.push(s);
      },
    },
  };
}

/** Mean absolute difference per channel of two frames over a box. */
function meanDiff(a: Uint8Array, b: Uint8Array, width: number, box: Box): number {
  let sum = 0;
  for (let y = box.y; y < box.y + box.height; y++) {
    for (let o = (y * width + box.x) * 3, end = (y * width + box.x + box.width) * 3; o < end; o++) {
      sum += Math.abs(a[o]! - b[o]!);
    }
  }
  return sum / (box.width * box.height * 3);
}

/** Pixels of `inside` (a mask of the frame) whose largest channel difference is over 12 levels (x264's noise is below). */
function changed(a: Uint8Array, b: Uint8Array, inside: Uint8Array): number {
  let n = 0;
  for (let p = 0; p < inside.length; p++) {
    if (!inside[p]) continue;
    const o = p * 3;
    if (Math.max(Math.abs(a[o]! - b[o]!), Math.abs(a[o + 1]! - b[o + 1]!), Math.abs(a[o + 2]! - b[o + 2]!)) > 12) n++;
  }
  return n;
}

describe('video-face-swap refusals and guard', () => {
  let jt: VideoFaceSwapJobType;
  let source: Buffer;

  beforeAll(async () => {
    jt = createVideoFaceSwapJobType({ threads: 2 });
    source = await portrait('curlyBlonde');
  }, LONG);
  afterAll(() => jt?.close());

  it(
    'leaves a face as it is in the frames where it turns to profile, swaps it elsewhere, and says in how many',
    async () => {
      const [frontal, profile] = await frontalAndProfile();
      // 10 frames frontal, 10 in profile (about where the frontal face was), 10 frontal again.
      const order = [...Array<number>(10).fill(0), ...Array<number>(10).fill(1), ...Array<number>(10).fill(0)];
      const clip = await makeSequence([frontal, profile], order);
      const run = context(source, clip);
      const out = (await jt.run(run.ctx)).bytes;
      const [a, b] = await Promise.all([decodeFrames(clip), decodeFrames(out)]);
      const face: Box = { x: 100, y: 60, width: 140, height: 160 };
      const diff = a.frames.map((f, i) => meanDiff(f, b.frames[i]!, STILL.width, face));
      // Swapped before the turn (until the frame next to it) and after it.
      for (const i of [0, 4, 8, 20, 24, 29]) expect(diff[i], `frame ${i}`).toBeGreaterThan(8);
      // In profile: only x264's re-encoding (about 1.2; swapped, these frames read 9-12).
      for (let i = 10; i < 20; i++) expect(diff[i], `frame ${i}`).toBeLessThan(2.5);
      const stage = run.stages.find((s) => s.startsWith('encoding'));
      const m = /^encoding \(a face left as it is in (\d+) of 30 frames: in profile or too small to swap\)$/.exec(
        stage ?? '',
      );
      expect(m, stage).not.toBeNull();
      // The 10 profile frames, and the frame before them (between a frontal and a profile one, held).
      expect(Number(m![1])).toBeGreaterThanOrEqual(10);
      expect(Number(m![1])).toBeLessThanOrEqual(12);
    },
    LONG,
  );

  it(
    'fails a face picked by index that is a profile on the first frame, as the image swap does',
    async () => {
      const [, profile] = await frontalAndProfile();
      const clip = await makeSequence([profile], Array<number>(6).fill(0));
      const err = await errorOf(jt.run(context(source, clip, { target_face_indices: [0] }).ctx));
      expect(err.errorType).toBe('invalid_media');
      // Named by its box on the first frame as decoded, as face-detect would give it there.
      const decoded = await decodeFrames(clip);
      const first = { data: decoded.frames[0]!, width: decoded.width, height: decoded.height };
      const box = leftToRight(await findFaces(first, 0.5))[0]!.box;
      expect(err.message).toBe(
        `input.target: face 0 (at x ${Math.round(box.x)}, y ${Math.round(box.y)}) is in profile; ` +
          'the swap needs a face turned less (both eyes and cheeks showing)',
      );
    },
    LONG,
  );

  it(
    'fails at once for a source whose eyes do not show, with the image swap’s message',
    async () => {
      // sample4's third face looks down, its eyes lowered and in shadow (test/face-swap/source.test.ts).
      const clip = await makeClip({ seconds: 1 });
      const lowered = await portrait('sample4third');
      const err = await errorOf(jt.run(context(lowered, clip).ctx));
      expect(err.errorType).toBe('invalid_media');
      expect(err.message).toMatch(
        /^input\.source: the face at x \d+, y \d+ does not show its eyes \(closed, lowered, squinting or in shadow\); use a source photo facing the camera with both eyes open and lit$/,
      );
    },
    LONG,
  );

  it(
    "swapping one of two faces cheek to cheek leaves the other's pixels alone, in every frame",
    async () => {
      const clip = await makeSequence([await twoHeads()], Array<number>(16).fill(0));
      const first = await decodeImage(await twoHeads(), 'test', 1e8);
      const region = { left: 0, top: 0, width: first.width, height: first.height };
      const boxes = leftToRight(await findFaces(first, 0.5)).map((f) => f.box);
      expect(boxes).toHaveLength(2);
      const hulls: Uint8Array[] = [];
      for (const box of boxes) {
        const lm = await detectLandmarks(first, box);
        hulls.push(rasterizePolygon(convexHull(extendForehead(lm, 0.2)), region));
      }
      const original = await decodeFrames(clip);
      // Tiny scores the right-hand face 0.49 at this size: key frames find it at 0.4.
      for (const [index, other] of [
        [0, 1],
        [1, 0],
      ] as const) {
        const out = await jt.run(context(source, clip, { target_face_indices: [index], min_confidence: 0.4 }).ctx);
        const swapped = await decodeFrames(out.bytes);
        const counts = original.frames.map((f, i) => changed(f, swapped.frames[i]!, hulls[other]!));
        const own = original.frames.map((f, i) => changed(f, swapped.frames[i]!, hulls[index]!));
        // Unguarded, the outline move's ring changed 56-978 such pixels of the other face per frame.
        expect(Math.max(...counts), `face ${other} beside face ${index}: ${counts.join(' ')}`).toBeLessThanOrEqual(20);
        expect(Math.min(...own)).toBeGreaterThan(1000);
      }
    },
    LONG,
  );
});
