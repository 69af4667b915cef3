/** The level frame (level.ts), the open-mouth hole (mouth.ts) and the mirrored source (mirror.ts) on synthetic pictures. */
import { describe, expect, it } from 'vitest';
import { composite } from '../../src/processors/face-swap/blend.js';
import { fromLevel, levelFrame, rollOf, toLevel, unlevel } from '../../src/processors/face-swap/level.js';
import { noseAcross } from '../../src/processors/face-swap/geometry.js';
import { mirrorFace, prefersMirror } from '../../src/processors/face-swap/mirror.js';
import { innerMouthHole, mouthGap } from '../../src/processors/face-swap/mouth.js';
import type { Point, RgbImage } from '../../src/processors/face-swap/types.js';

/** 68 points of a schematic upright face centred at (cx, cy), rolled by `angle`; `gap` opens the inner lips. */
function face(cx: number, cy: number, angle: number, gap = 0): Point[] {
  const pts: Point[] = [];
  for (let i = 0; i < 68; i++) pts.push({ x: 0, y: 0 });
  for (let i = 0; i < 17; i++) pts[i] = { x: -50 + (100 * i) / 16, y: 20 + 30 * Math.sin((Math.PI * i) / 16) };
  for (let i = 17; i < 27; i++) pts[i] = { x: -40 + (80 * (i - 17)) / 9, y: -30 };
  for (let i = 27; i < 36; i++) pts[i] = { x: (i - 31) * 3, y: -15 + (i - 27) * 4 };
  for (let i = 36; i < 42; i++)
    pts[i] = { x: -25 + 4 * Math.cos((Math.PI * (i - 36)) / 3), y: -15 + 2 * Math.sin((Math.PI * (i - 36)) / 3) };
  for (let i = 42; i < 48; i++)
    pts[i] = { x: 25 + 4 * Math.cos((Math.PI * (i - 42)) / 3), y: -15 + 2 * Math.sin((Math.PI * (i - 42)) / 3) };
  for (let i = 48; i < 60; i++) {
    const a = (2 * Math.PI * (i - 48)) / 12;
    pts[i] = { x: -20 * Math.cos(a), y: 30 - 8 * Math.sin(a) };
  }
  // Inner lips: 60 and 64 the corners, 61-63 the upper lip's lower edge, 65-67 the lower lip's upper edge.
  for (let i = 60; i < 68; i++) {
    const a = (2 * Math.PI * (i - 60)) / 8;
    pts[i] = { x: -15 * Math.cos(a), y: 30 - (gap / 2) * Math.sin(a) };
  }
  const c = Math.cos(angle);
  const s = Math.sin(angle);
  return pts.map((p) => ({ x: cx + c * p.x - s * p.y, y: cy + s * p.x + c * p.y }));
}

function gradient(w: number, h: number): RgbImage {
  const data = new Uint8Array(w * h * 3);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const o = (y * w + x) * 3;
      data[o] = x % 256;
      data[o + 1] = y % 256;
      data[o + 2] = (x + y) % 256;
    }
  }
  return { data, width: w, height: h };
}

describe('level frame', () => {
  it('measures the roll from the eyes and maps points there and back exactly', () => {
    for (const deg of [-25, 0, 10, 25]) {
      const lm = face(200, 180, (deg * Math.PI) / 180);
      expect((rollOf(lm) * 180) / Math.PI).toBeCloseTo(deg, 6);
      const f = levelFrame(gradient(400, 360), lm);
      for (const p of lm) {
        const q = fromLevel(f, toLevel(f, p));
        expect(q.x).toBeCloseTo(p.x, 9);
        expect(q.y).toBeCloseTo(p.y, 9);
      }
      // In the frame the eyes are level.
      expect(rollOf(lm.map((p) => toLevel(f, p)))).toBeCloseTo(0, 9);
    }
  });

  it('samples the picture rotated, and comes back only where the alpha is non-zero', () => {
    const img = gradient(400, 360);
    const lm = face(200, 180, (25 * Math.PI) / 180);
    const f = levelFrame(img, lm);
    // A crop pixel shows the picture at its mapped position (a smooth gradient: within rounding).
    const q = { x: f.image.width / 2 + 10.5, y: f.image.height / 2 - 7.5 };
    const p = fromLevel(f, q);
    const o = (Math.floor(q.y) * f.image.width + Math.floor(q.x)) * 3;
    expect(Math.abs(f.image.data[o]! - (p.x - 0.5))).toBeLessThan(1.5);
    expect(Math.abs(f.image.data[o + 1]! - (p.y - 0.5))).toBeLessThan(1.5);

    // Paint the crop and paste it with alpha 1 on a small disc only: nothing else changes.
    f.image.data.fill(255);
    const side = f.image.width;
    const alpha = new Float32Array(side * side);
    for (let y = 0; y < side; y++)
      for (let x = 0; x < side; x++) if (Math.hypot(x - side / 2, y - side / 2) < 20) alpha[y * side + x] = 1;
    const before = Uint8Array.from(img.data);
    const back = unlevel(img, f, alpha)!;
    composite(img, back.region, back.face, back.alpha);
    let changed = 0;
    for (let y = 0; y < img.height; y++) {
      for (let x = 0; x < img.width; x++) {
        const i = (y * img.width + x) * 3;
        if (img.data[i] === before[i] && img.data[i + 1] === before[i + 1] && img.data[i + 2] === before[i + 2])
          continue;
        changed++;
        expect(Math.hypot(x + 0.5 - f.c.x, y + 0.5 - f.c.y)).toBeLessThan(22);
      }
    }
    expect(changed).toBeGreaterThan(1000);
    expect(img.data[(Math.floor(f.c.y) * 400 + Math.floor(f.c.x)) * 3]).toBe(255);
  });
});

describe('open mouth', () => {
  it('cuts the inner mouth out only when the lips are apart', () => {
    const region = { left: 0, top: 0, width: 400, height: 360 };
    const closed = face(200, 180, 0, 0);
    expect(mouthGap(closed, 100)).toBeLessThan(0.01);
    expect(innerMouthHole(closed, region, 100)).toBeUndefined();
    const open = face(200, 180, 0, 12);
    const hole = innerMouthHole(open, region, 100)!;
    expect(hole[210 * 400 + 200]).toBe(1); // the middle of the opening
    expect(hole[180 * 400 + 200]).toBe(0); // the nose, well outside it
  });
});

describe('mirrored source', () => {
  it('mirrors the face region and renumbers its landmarks, so each point stays on its feature', () => {
    const img = gradient(400, 360);
    // A schematic face turned: its nose tip pushed towards the jaw's left end.
    const lm = face(200, 180, 0);
    for (const i of [27, 28, 29, 30, 31, 32, 33, 34, 35]) lm[i] = { x: lm[i]!.x - 20, y: lm[i]!.y };
    const m = mirrorFace(img, lm);
    // The left eye's outer corner (36) is now the mirror of the right eye's (45), still on image left.
    expect(m.lm[36]!.x).toBeLessThan(m.lm[45]!.x);
    expect(m.lm[0]!.x).toBeLessThan(m.lm[16]!.x);
    expect(noseAcross(m.lm)).toBeCloseTo(1 - noseAcross(lm), 6);
    // Pixels: the one under a landmark's partner in the original is the one under it in the mirror
    // (within a pixel: the schematic points sit on pixel edges; the gradient's red is x, blue x + y).
    const p = m.lm[45]!;
    const q = lm[36]!;
    const at = (im: RgbImage, x: number, y: number) => im.data[(Math.floor(y) * im.width + Math.floor(x)) * 3 + 2]!;
    expect(Math.abs(at(m.image, p.x, p.y) - at(img, q.x, q.y))).toBeLessThanOrEqual(1);
    // Mirrored twice: the same landmarks.
    const back = mirrorFace(m.image, m.lm);
    expect(noseAcross(back.lm)).toBeCloseTo(noseAcross(lm), 6);
  });

  it('mirrors only for a target turned the other way, and turned enough', () => {
    const frontal = face(200, 180, 0);
    const turned = (dx: number) => frontal.map((p, i) => (i >= 27 && i < 36 ? { x: p.x + dx, y: p.y } : p));
    expect(prefersMirror(turned(-10), turned(20), 0.12)).toBe(true);
    expect(prefersMirror(turned(-10), turned(-20), 0.12)).toBe(false);
    expect(prefersMirror(turned(-10), turned(5), 0.12)).toBe(false);
  });
});
