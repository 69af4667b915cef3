/**
 * A video swap thread warms up on the per-frame path itself (video/warmup.ts): real frames of a
 * face at a video face's size, swapped as a job swaps them, each measuring the face's colour
 * (which the next frame takes, as in a job). A path that stopped swapping (a region off the face,
 * a face too small to render) would leave the first job compiling it.
 */
import { describe, expect, it } from 'vitest';
import { warmFrameSwaps } from '../../src/processors/video/warmup.js';

describe('video swap thread warm-up', () => {
  it('swaps real frames, each measuring the colour the next one takes', async () => {
    expect(await warmFrameSwaps(2)).toBe(2);
  });
});
