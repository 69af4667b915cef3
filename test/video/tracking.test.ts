/**
 * Landmark jitter over time. On a clip of a still photo with camera-like temporal noise (no true motion at all), every movement of the
 * landmarks between consecutive frames is jitter; the tracker's One-Euro smoothing must keep it below
 * a bound measured here (see docs/video.md), and well below the landmark net's own frame-to-frame noise.
 */
import { describe, expect, it } from 'vitest';
import { computeDescriptor, detectLandmarks, locateFacesTiny } from '../../src/processors/face-swap/detect.js';
import { faceSize } from '../../src/processors/face-swap/geometry.js';
import type { Point } from '../../src/processors/face-swap/types.js';
import { FaceTracker, MEASURE_EVERY } from '../../src/processors/video/tracker.js';
import { decodeFrames, makeClip } from './fixtures.js';

/** Mean landmark displacement between consecutive frames, in % of the face size. */
function jitter(seq: Point[][]): number {
  let sum = 0;
  let n = 0;
  for (let i = 1; i < seq.length; i++) {
    const size = faceSize(seq[i]!);
    for (let k = 0; k < 68; k++) {
      sum += Math.hypot(seq[i]![k]!.x - seq[i - 1]![k]!.x, seq[i]![k]!.y - seq[i - 1]![k]!.y) / size;
      n++;
    }
  }
  return (100 * sum) / n;
}

describe('tracking', () => {
  it('smooths landmark jitter on a still face', async () => {
    const clip = await makeClip({ seconds: 1.6, pan: 0, audio: 'none', noise: 8 });
    const { width, height, frames } = await decodeFrames(clip);
    const tracker = new FaceTracker(
      {
        detect: async (frame) => {
          const boxes = await locateFacesTiny(frame, 0.5);
          return Promise.all(boxes.map(async (b) => ({ ...b, landmarks: await detectLandmarks(frame, b.box) })));
        },
        landmarks: (crop, box) => detectLandmarks(crop, box),
        descriptor: (crop, lm) => computeDescriptor(crop, lm),
      },
      { mode: 'largest', matchThreshold: 0.6, keyInterval: 8, fps: 25, maxFaces: 8 },
    );
    const raw: Point[][] = [];
    const smooth: Point[][] = [];
    for (let i = 0; i < frames.length; i++) {
      const tracks = await tracker.analyse({ data: frames[i]!, width, height }, i);
      expect(tracks.length).toBeLessThanOrEqual(1);
      if (!tracks[0]) continue;
      raw.push(tracks[0].raw);
      smooth.push(tracks[0].smooth);
    }
    // Found on the first key frame, or on the next one (the detector's score varies with the noise).
    expect(raw.length).toBeGreaterThanOrEqual(frames.length - 8);
    const r = jitter(raw);
    const s = jitter(smooth);
    console.log(`landmark jitter per frame: raw ${r.toFixed(3)}%, smoothed ${s.toFixed(3)}% of the face size`);
    expect(s).toBeLessThan(0.25);
    expect(s).toBeLessThan(r / 2);
  }, 300_000);

  it('measures every other frame and every key frame; the frames between are interpolated', () => {
    const none = () => Promise.reject(new Error('not called'));
    const tracker = new FaceTracker(
      { detect: none, landmarks: none, descriptor: none },
      { mode: 'largest', matchThreshold: 0.6, keyInterval: 5, fps: 15, maxFaces: 8 },
    );
    expect(MEASURE_EVERY).toBe(2);
    const measured = Array.from({ length: 12 }, (_, i) => i).filter((i) => tracker.measures(i));
    expect(measured).toEqual([0, 2, 4, 5, 6, 8, 10]);
  });
});
