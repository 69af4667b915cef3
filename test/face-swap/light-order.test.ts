/**
 * The lightness surface's order (light-order.ts) and what it does to the light the colour step
 * gives a face (recolor.ts matchColour). Synthetic planes, no models: fast.
 */
import { describe, expect, it } from 'vitest';
import { heldOutDegree } from '../../src/processors/face-swap/light-order.js';
import { matchColour, type ColourPlanes } from '../../src/processors/face-swap/recolor.js';

const W = 120;
const H = 140;

/** A deterministic texture (a pore's worth of noise, in ln(L* + 16)). */
function texture(seed: number): (i: number) => number {
  const v = new Float64Array(W * H);
  let s = seed;
  for (let i = 0; i < v.length; i++) v[i] = ((s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32 - 0.5) * 0.04;
  return (i) => v[i]!;
}

/** A light from the image's left: ln(L* + 16) falls by 0.5 across the plane, and rises 0.1 downwards. */
const light = (x: number, y: number) => 0.5 * (0.5 - x / W) + 0.1 * (y / H);

/** A face's planes: skin of one colour at ln(L* + 16) = 4.4 (+ `lit`), with its own texture. */
function planes(lit: (x: number, y: number) => number, seed: number): ColourPlanes {
  const lab = new Float32Array(W * H * 3);
  const tex = texture(seed);
  for (let y = 0; y < H; y++) {
    for (let x = 0; x < W; x++) {
      const i = y * W + x;
      lab.set([Math.exp(4.4 + lit(x, y) + tex(i)) - 16, 12, 18], i * 3);
    }
  }
  return { lab, zones: new Uint8Array(W * H), nonSkin: new Uint8Array(W * H) };
}

describe('the lightness surface', () => {
  it('follows a side light beyond a skin sample that covers one side only, where a cubic swung', () => {
    const src = planes(() => 0, 1);
    const before = Float32Array.from(src.lab);
    const dst = planes(light, 2);
    // Skin on the lit left 45% only (hair or an occluder over the rest), as the mask's alpha.
    const alpha = new Float32Array(W * H);
    for (let i = 0; i < W * H; i++) alpha[i] = i % W < 0.45 * W ? 1 : 0;
    const canvas = {
      region: { left: 0, top: 0, width: W, height: H },
      covered: new Uint8Array(W * H).fill(1),
      size: 100,
      margin: 5,
    };
    matchColour(canvas, src, dst, { alpha, occluded: undefined }, undefined, { sigmaAB: 0.1 });
    // The light the new face took on, column by column over its unsampled right side, against the
    // target's: the cubic fitted to the left side's texture swung off it by 0.069 (a column's mean;
    // 0.27 at a pixel of the far edge, its light a quarter off the photo's); the plane the
    // held-out blocks choose stays within 0.002.
    let worst = 0;
    for (let x = Math.ceil(0.6 * W); x < W; x++) {
      let off = 0;
      for (let y = 0; y < H; y++) {
        const i = (y * W + x) * 3;
        off += Math.log(src.lab[i]! + 16) - Math.log(before[i]! + 16) - light(x, y);
      }
      worst = Math.max(worst, Math.abs(off / H));
    }
    expect(worst).toBeLessThan(0.03);
  });

  it('keeps the cubic where every part of the skin shows the light curving', () => {
    const src = planes(() => 0, 1).lab;
    // A light that wraps round the face: falls off as a cubic in x (a side light's terminator).
    const curved = (x: number) => {
      const u = x / W - 0.5;
      return -1.2 * u + 3 * u * u * u + 0.6 * u * u;
    };
    const dst = planes(curved, 2).lab;
    const weight = new Float32Array(W * H).fill(1);
    for (const d of [src, dst]) for (let i = 0; i < W * H; i++) d[i * 3] = Math.log(d[i * 3]! + 16);
    expect(heldOutDegree({ src, dst, weight, channel: 0, w: W, h: H, step: 2 }, 3)).toBe(3);
    // The same skin under a light straight across it takes the plane.
    const flat = planes((x, y) => light(x, y), 2).lab;
    for (let i = 0; i < W * H; i++) flat[i * 3] = Math.log(flat[i * 3]! + 16);
    expect(heldOutDegree({ src, dst: flat, weight, channel: 0, w: W, h: H, step: 2 }, 3)).toBe(1);
  });
});
