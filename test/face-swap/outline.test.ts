/** The outline move (the `jaw` knob): the photo follows the jaw, nothing beyond its ring changes. No models loaded. */
import { describe, expect, it } from 'vitest';
import { liquifyOutline, reshapedJaw } from '../../src/processors/face-swap/outline.js';
import type { Point, RgbImage } from '../../src/processors/face-swap/types.js';

const SIDE = 200;
const C = { x: 100, y: 90 };
const R = 50;

/** A bright disc (the face, radius R) on a dark ground, and 68 landmarks: jaw on its lower rim, the rest inside. */
function disc(): { img: RgbImage; lm: Point[] } {
  const data = new Uint8Array(SIDE * SIDE * 3);
  for (let y = 0; y < SIDE; y++) {
    for (let x = 0; x < SIDE; x++) {
      // With a photo's noise (a fixed pattern of ±8 levels): flat areas are kept as painted things.
      const v = (Math.hypot(x + 0.5 - C.x, y + 0.5 - C.y) <= R ? 200 : 30) + (((x * 7 + y * 13) % 17) - 8);
      data.fill(v, (y * SIDE + x) * 3, (y * SIDE + x) * 3 + 3);
    }
  }
  const lm: Point[] = [];
  for (let i = 0; i < 17; i++) {
    const a = Math.PI * (i / 16); // 0..π: right to left along the lower rim
    lm.push({ x: C.x + R * Math.cos(Math.PI - a), y: C.y + R * Math.sin(Math.PI - a) });
  }
  for (let i = 17; i < 68; i++) {
    const a = (2 * Math.PI * i) / 51;
    lm.push({ x: C.x + 0.4 * R * Math.cos(a), y: C.y + 0.4 * R * Math.sin(a) });
  }
  lm[30] = { ...C };
  return { img: { width: SIDE, height: SIDE, data }, lm };
}

const at = (img: RgbImage, x: number, y: number) => img.data[(Math.floor(y) * SIDE + Math.floor(x)) * 3]!;

describe('face-swap outline move', () => {
  it('moves the jaw towards the aligned source, the ends at the ears fixed, by the amount asked', () => {
    const { lm } = disc();
    const narrower = lm.map((p, i) => (i < 17 ? { x: C.x + 0.8 * (p.x - C.x), y: C.y + 0.8 * (p.y - C.y) } : p));
    const half = reshapedJaw(narrower, lm, 0.5);
    expect(half[0]).toEqual(lm[0]);
    expect(half[16]).toEqual(lm[16]);
    expect(half[8]!.y).toBeCloseTo(lm[8]!.y - 0.5 * 0.2 * R, 5);
    expect(half.slice(17)).toEqual(lm.slice(17));
  });

  it("moves a turned target's far cheek outwards only in part, its near cheek and chin in full", () => {
    const { lm } = disc();
    // Eyes level, the nose tip pushed towards point 16's end: points 9-16 are the far cheek.
    for (let i = 36; i < 42; i++) lm[i] = { x: C.x - 20 + (i - 36), y: C.y - 15 };
    for (let i = 42; i < 48; i++) lm[i] = { x: C.x + 15 + (i - 42), y: C.y - 15 };
    lm[30] = { x: C.x + 0.5 * R, y: C.y };
    const wider = lm.map((p, i) => (i < 17 ? { x: C.x + 1.2 * (p.x - C.x), y: p.y } : p));
    const moved = reshapedJaw(wider, lm, 1);
    const frontal = reshapedJaw(wider, lm, 1, 0);
    // noseAcross 0.75: the far side keeps 1 - 3 * 0.25 of its outward move.
    expect(moved[12]!.x - lm[12]!.x).toBeCloseTo(0.25 * (frontal[12]!.x - lm[12]!.x), 5);
    expect(moved[4]).toEqual(frontal[4]);
    expect(moved[8]).toEqual(frontal[8]);
  });

  it('leaves a flat painted bar across the jaw exactly as it was', () => {
    const { img, lm } = disc();
    const bar = { x0: 20, x1: 180, y0: Math.round(C.y + 0.6 * R), y1: Math.round(C.y + 0.8 * R) };
    for (let y = bar.y0; y < bar.y1; y++) {
      for (let x = bar.x0; x < bar.x1; x++) img.data.set([28, 44, 110], (y * SIDE + x) * 3);
    }
    const before = Uint8Array.from(img.data);
    const narrower = lm.map((p, i) => (i < 17 ? { x: C.x + 0.8 * (p.x - C.x), y: C.y + 0.8 * (p.y - C.y) } : p));
    liquifyOutline(img, lm, reshapedJaw(narrower, lm, 1));
    let changed = 0;
    for (let y = bar.y0 + 2; y < bar.y1 - 2; y++) {
      for (let x = bar.x0 + 2; x < bar.x1 - 2; x++)
        if (img.data[(y * SIDE + x) * 3] !== before[(y * SIDE + x) * 3]) changed++;
    }
    expect(changed).toBe(0);
    // The photo around it did move.
    expect(at(img, C.x, C.y + 0.9 * R)).toBeLessThan(60);
  });

  it('pulls the background in behind a narrowed chin (no second edge) and leaves the photo beyond the ring', () => {
    const { img, lm } = disc();
    const before = Uint8Array.from(img.data);
    const narrower = lm.map((p, i) => (i < 17 ? { x: C.x + 0.8 * (p.x - C.x), y: C.y + 0.8 * (p.y - C.y) } : p));
    const to = reshapedJaw(narrower, lm, 1);
    const alpha = new Float32Array(SIDE * SIDE);
    liquifyOutline(img, lm, to, alpha);
    // Just inside the old chin: now background; just inside the new one: still face.
    expect(at(img, C.x, C.y + 0.9 * R)).toBeLessThan(60);
    expect(at(img, C.x, C.y + 0.75 * R)).toBeGreaterThan(180);
    // Far below the chin (beyond the ring) and above the face: untouched, and so marked.
    for (const [x, y] of [
      [C.x, 195],
      [C.x, 10],
      [5, C.y],
    ] as const) {
      const p = (y * SIDE + x) * 3;
      expect(img.data[p]).toBe(before[p]);
      expect(alpha[y * SIDE + x]).toBe(0);
    }
    expect(alpha[Math.floor(C.y + 0.9 * R) * SIDE + C.x]).toBe(1);
  });
});
