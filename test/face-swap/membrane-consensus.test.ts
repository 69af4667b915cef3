/**
 * The Poisson membrane's consensus rule (blend.ts, MIN_AGREEING): around a face whose outline is
 * partly hidden by hair and background, the part of the ring that agrees on the photo's light is
 * followed, however much of the rest disagrees in clusters of its own; with too little agreement the
 * face is left to the feathered blend. Synthetic, no models.
 */
import { describe, expect, it } from 'vitest';
import { cloneCorrection } from '../../src/processors/face-swap/blend.js';
import type { RgbImage } from '../../src/processors/face-swap/types.js';

const SIDE = 120;
const FACE = 130;
/** The photo's light on the skin beside the face: the target 15 levels brighter than the new face. */
const LIGHT = 15;

/**
 * A disc of face (grey FACE) in a SIDE² region; the target around it is the face plus LIGHT over the
 * `agreeing` share of the angles and, over the rest, dark hair (FACE − 120) then something pale (FACE + 90), in
 * the proportion 60:40. Returns the face after the membrane.
 */
function swapDisc(agreeing: number): Float32Array {
  const n = SIDE * SIDE;
  const target: RgbImage = { width: SIDE, height: SIDE, data: new Uint8Array(n * 3) };
  const warped = new Float32Array(n * 3).fill(FACE);
  const alpha = new Float32Array(n);
  const covered = new Uint8Array(n).fill(1);
  const c = SIDE / 2;
  for (let y = 0; y < SIDE; y++) {
    for (let x = 0; x < SIDE; x++) {
      const i = y * SIDE + x;
      if (Math.hypot(x + 0.5 - c, y + 0.5 - c) < 40) alpha[i] = 1;
      // Share of the way round, from the left, clockwise: contiguous arcs as hair and a light lie.
      const t = (Math.atan2(y + 0.5 - c, x + 0.5 - c) + Math.PI) / (2 * Math.PI);
      const hair = 0.6 * (1 - agreeing);
      const v = t < hair ? FACE - 120 : t < 1 - agreeing ? FACE + 90 : FACE + LIGHT;
      target.data.fill(v, i * 3, i * 3 + 3);
    }
  }
  const region = { left: 0, top: 0, width: SIDE, height: SIDE };
  cloneCorrection(target, { region, rgb: warped, covered, alpha, size: 80 });
  return warped;
}

function insideRange(face: Float32Array): { min: number; max: number } {
  let min = Infinity;
  let max = -Infinity;
  for (let y = 0; y < SIDE; y++) {
    for (let x = 0; x < SIDE; x++) {
      if (Math.hypot(x + 0.5 - SIDE / 2, y + 0.5 - SIDE / 2) >= 40) continue;
      const v = face[(y * SIDE + x) * 3]!;
      min = Math.min(min, v);
      max = Math.max(max, v);
    }
  }
  return { min, max };
}

describe('the membrane around a face partly hidden by hair', () => {
  it('takes the light the agreeing part of the ring shows, and none of the hair, with 40% agreeing', () => {
    // 60% of the ring disagrees: before, "most of the ring" skipped the membrane, and the face kept
    // none of the photo's light.
    const { min, max } = insideRange(swapDisc(0.4));
    expect(min).toBeGreaterThan(FACE + LIGHT - 1);
    expect(max).toBeLessThan(FACE + LIGHT + 1);
  });

  it('is left out (the feathered blend alone) when only a quarter of the ring agrees', () => {
    const { min, max } = insideRange(swapDisc(0.25));
    expect(min).toBe(FACE);
    expect(max).toBe(FACE);
  });
});
