/**
 * A swap thread gets only the face region of a frame (region.ts): swapping that region and pasting
 * it back must give exactly the frame a swap on the whole frame gives, for a face in the middle of a
 * 720p frame and for one whose region is cut by the frame's edges.
 */
import { describe, expect, it } from 'vitest';
import { detectLandmarks, locateFaces, locateFacesTiny } from '../../src/processors/face-swap/detect.js';
import { decodeImage } from '../../src/processors/face-swap/image.js';
import { swapFace } from '../../src/processors/face-swap/swap.js';
import type { RgbImage } from '../../src/processors/face-swap/types.js';
import { cropFrame, pasteFrame, shiftPoints, swapRegion } from '../../src/processors/video/region.js';
import { portrait } from '../face-swap/fixtures.js';
import { decodeFrames, makeClip } from './fixtures.js';

async function firstFrame(clip: Buffer): Promise<RgbImage> {
  const { width, height, frames } = await decodeFrames(clip);
  return { data: frames[0]!, width, height };
}

describe('swap region', () => {
  it('a swap on the face region equals one on the whole frame', async () => {
    const src = await decodeImage(new Uint8Array(await portrait('curlyBlonde')), 'source', 40_000_000);
    const srcLm = await detectLandmarks(src, (await locateFaces(src, 0.5))[0]!.box);
    const frames: [RgbImage, 'inside' | 'cut'][] = [
      // A 720p frame with the face well inside it.
      [
        await firstFrame(
          await makeClip({
            region: { left: 960, top: 120, width: 960, height: 540 },
            width: 1280,
            height: 720,
            fps: 30,
            seconds: 0.2,
            audio: 'none',
          }),
        ),
        'inside',
      ],
      // The tests' small clip: the face fills the frame, so the frame's edges cut the region.
      [await firstFrame(await makeClip({ seconds: 0.2, audio: 'none' })), 'cut'],
    ];
    for (const [frame, where] of frames) {
      const box = (await locateFacesTiny(frame, 0.5))[0]!.box;
      const lm = await detectLandmarks(frame, box);
      const opts = { blend: 'poisson' as const, colorCorrection: true };

      const whole: RgbImage = { ...frame, data: frame.data.slice() };
      const statsWhole = await swapFace(whole, lm, src, srcLm, opts);

      const r = swapRegion([lm], frame.width, frame.height);
      const inside = r.left > 0 && r.top > 0 && r.left + r.width < frame.width && r.top + r.height < frame.height;
      expect(inside).toBe(where === 'inside');
      const part = cropFrame(frame, r);
      const statsPart = await swapFace(part, shiftPoints(lm, -r.left, -r.top), src, srcLm, opts);
      const pasted: RgbImage = { ...frame, data: frame.data.slice() };
      pasteFrame(pasted, part, r);

      expect(statsPart).toEqual(statsWhole);
      expect(Buffer.compare(Buffer.from(pasted.data), Buffer.from(whole.data))).toBe(0);
    }
  }, 300_000);
});
