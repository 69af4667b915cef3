/** Fast tests of the pure parts: options, geometry, warp, mask, colour, membrane. No models loaded. */
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { JobError } from '../../src/errors.js';
import { solveMembrane } from '../../src/processors/face-swap/blend.js';
import {
  channelStats,
  labToRgb,
  regionLab,
  regionRgb,
  rgbToLab,
  transferStats,
} from '../../src/processors/face-swap/color.js';
import { boundingRegion, convexHull, polygonArea } from '../../src/processors/face-swap/geometry.js';
import { CONTENT_TYPES, decodeImage, encodeImage } from '../../src/processors/face-swap/image.js';
import { createFaceSwapJobType, faceSwapOptionsSchema } from '../../src/processors/face-swap/index.js';
import { distanceInside, featherAlpha, rasterizePolygon } from '../../src/processors/face-swap/mask.js';
import { checkInputs, effectiveFaceMode } from '../../src/processors/face-swap/pipeline.js';
import { matchDetail } from '../../src/processors/face-swap/detail.js';
import { browsAndEyes } from '../../src/processors/face-swap/zone-moments.js';
import { arenaBytes, floats, withScratch } from '../../src/processors/face-swap/scratch.js';
import { kthSmallest, medianInPlace } from '../../src/processors/face-swap/select.js';
import { alignSimilarity, foldedFraction } from '../../src/processors/face-swap/swap.js';
import { upsampleFace } from '../../src/processors/face-swap/upsample.js';
import type { Point, RgbImage } from '../../src/processors/face-swap/types.js';
import { triangulate, warpPiecewiseAffine } from '../../src/processors/face-swap/warp.js';

describe('face-swap options', () => {
  it('fills defaults and rejects unknown or invalid fields', () => {
    expect(faceSwapOptionsSchema.parse({})).toEqual({
      format: 'jpeg',
      quality: 90,
      blend: 'poisson',
      color_correction: true,
      min_confidence: 0.5,
      match_threshold: 0.6,
    });
    expect(faceSwapOptionsSchema.safeParse({ fromat: 'png' }).success).toBe(false);
    expect(faceSwapOptionsSchema.safeParse({ faces: 'some' }).success).toBe(false);
    expect(faceSwapOptionsSchema.safeParse({ quality: 0 }).success).toBe(false);
    expect(faceSwapOptionsSchema.safeParse({ format: 'gif' }).success).toBe(false);
  });

  it('describes every option in its JSON Schema (the API docs are generated from it)', () => {
    const schema = z.toJSONSchema(faceSwapOptionsSchema, { io: 'input' }) as {
      additionalProperties: boolean;
      properties: Record<string, { description?: string }>;
    };
    expect(schema.additionalProperties).toBe(false);
    for (const [name, prop] of Object.entries(schema.properties)) {
      expect(prop.description, name).toBeTruthy();
    }
  });

  it('declares its slots and model without starting threads', async () => {
    const jt = createFaceSwapJobType();
    expect(jt.name).toBe('image-face-swap');
    expect(jt.models.map((m) => m.name)).toEqual(['warp-blend-v1']);
    expect(jt.slots.source).toMatchObject({ required: true, min: 1, max: 1, accepts: 'image' });
    expect(jt.slots.target).toMatchObject({ required: true, min: 1, max: 1, accepts: 'image' });
    expect(jt.slots.reference).toMatchObject({ required: false, min: 1, max: 1, accepts: 'image' });
    expect(jt.slots.audio).toBeUndefined();
    await jt.close(); // no pool yet: a no-op
  });

  it('picks the faces mode and refuses contradictory inputs', () => {
    expect(effectiveFaceMode({}, false)).toBe('largest');
    expect(effectiveFaceMode({}, true)).toBe('reference');
    expect(effectiveFaceMode({ faces: 'all' }, false)).toBe('all');
    expect(() => checkInputs({ faces: 'reference' }, false)).toThrow(/^input\.reference: required/);
    expect(() => checkInputs({ faces: 'largest' }, true)).toThrow(JobError);
    expect(() => checkInputs({ faces: 'all' }, false)).not.toThrow();
    // Faces picked by index: only with the default mode and without a reference.
    expect(() => checkInputs({ target_face_indices: [0, 2] }, false)).not.toThrow();
    expect(() => checkInputs({ faces: 'largest', target_face_indices: [1] }, false)).not.toThrow();
    expect(() => checkInputs({ faces: 'all', target_face_indices: [1] }, false)).toThrow(
      /^input\.target_face_indices: cannot be combined with faces "all"/,
    );
    expect(() => checkInputs({ target_face_indices: [1] }, true)).toThrow(
      /^input\.target_face_indices: cannot be combined with a reference image$/,
    );
    expect(faceSwapOptionsSchema.safeParse({ target_face_indices: [1, 1] }).success).toBe(false);
    expect(faceSwapOptionsSchema.safeParse({ target_face_indices: [] }).success).toBe(false);
    expect(faceSwapOptionsSchema.safeParse({ target_face_indices: [0.5] }).success).toBe(false);
    expect(faceSwapOptionsSchema.safeParse({ source_face_index: 32 }).success).toBe(false);
  });
});

describe('geometry', () => {
  it('builds a convex hull and its area', () => {
    const pts: Point[] = [
      { x: 0, y: 0 },
      { x: 10, y: 0 },
      { x: 10, y: 10 },
      { x: 0, y: 10 },
      { x: 5, y: 5 },
      { x: 2, y: 7 },
    ];
    const hull = convexHull(pts);
    expect(hull).toHaveLength(4);
    expect(polygonArea(hull)).toBeCloseTo(100);
    expect(boundingRegion(pts, 2, 11, 100)).toEqual({ left: 0, top: 0, width: 11, height: 12 });
  });

  it('recovers a similarity transform exactly', () => {
    const src: Point[] = [
      { x: 1, y: 2 },
      { x: 5, y: 1 },
      { x: 3, y: 7 },
      { x: -2, y: 4 },
    ];
    const angle = 0.4;
    const scale = 1.7;
    const dst = src.map((p) => ({
      x: scale * (Math.cos(angle) * p.x - Math.sin(angle) * p.y) + 10,
      y: scale * (Math.sin(angle) * p.x + Math.cos(angle) * p.y) - 3,
    }));
    const aligned = alignSimilarity(src, dst, [0, 1, 2, 3]);
    aligned.forEach((p, i) => {
      expect(p.x).toBeCloseTo(dst[i]!.x, 6);
      expect(p.y).toBeCloseTo(dst[i]!.y, 6);
    });
  });
});

function gradientImage(width: number, height: number): RgbImage {
  const data = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const o = (y * width + x) * 3;
      data[o] = x * 2;
      data[o + 1] = y * 2;
      data[o + 2] = (x + y) % 256;
    }
  }
  return { data, width, height };
}

describe('fold detection', () => {
  it('measures the share of the warp that is mirrored', () => {
    const pts: Point[] = [
      { x: 0, y: 0 },
      { x: 10, y: 0 },
      { x: 0, y: 10 },
      { x: 10, y: 10 },
    ];
    const tris = triangulate(pts);
    expect(foldedFraction(pts, pts, tris)).toBe(0);
    const mirrored = pts.map((p) => ({ x: -p.x, y: p.y }));
    expect(foldedFraction(mirrored, pts, tris)).toBe(1);
  });
});

describe('piecewise-affine warp', () => {
  const grid: Point[] = [];
  for (let y = 0; y <= 4; y++) for (let x = 0; x <= 4; x++) grid.push({ x: 10 + x * 20, y: 10 + y * 20 });

  it('is the identity when source and destination points agree', () => {
    const img = gradientImage(120, 120);
    const region = { left: 0, top: 0, width: 120, height: 120 };
    const { rgb, covered } = warpPiecewiseAffine(img, grid, grid, triangulate(grid), region);
    let coveredCount = 0;
    for (let i = 0; i < 120 * 120; i++) {
      if (!covered[i]) continue;
      coveredCount++;
      for (let c = 0; c < 3; c++) expect(Math.abs(rgb[i * 3 + c]! - img.data[i * 3 + c]!)).toBeLessThan(1e-3);
    }
    // The hull of the grid is 80x80 pixels: covered without cracks.
    expect(coveredCount).toBe(80 * 80);
  });

  it('follows a translation of the points', () => {
    const img = gradientImage(120, 120);
    const moved = grid.map((p) => ({ x: p.x + 7, y: p.y + 3 }));
    const region = { left: 0, top: 0, width: 120, height: 120 };
    const { rgb, covered } = warpPiecewiseAffine(img, grid, moved, triangulate(moved), region);
    // Destination pixel (x, y) shows source pixel (x - 7, y - 3).
    for (const [x, y] of [
      [40, 40],
      [70, 25],
      [20, 80],
    ] as const) {
      const i = y * 120 + x;
      expect(covered[i]).toBe(1);
      expect(rgb[i * 3]).toBeCloseTo(img.data[((y - 3) * 120 + (x - 7)) * 3]!, 3);
      expect(rgb[i * 3 + 1]).toBeCloseTo(img.data[((y - 3) * 120 + (x - 7)) * 3 + 1]!, 3);
    }
  });
});

describe('mask', () => {
  it('rasterises a polygon and measures distance to its edge', () => {
    const square: Point[] = [
      { x: 10, y: 10 },
      { x: 50, y: 10 },
      { x: 50, y: 50 },
      { x: 10, y: 50 },
    ];
    const region = { left: 0, top: 0, width: 60, height: 60 };
    const inside = rasterizePolygon(square, region);
    let n = 0;
    for (const v of inside) n += v;
    expect(n).toBe(40 * 40);
    const dist = distanceInside(inside, 60, 60);
    expect(dist[30 * 60 + 30]).toBeCloseTo(20, 5); // centre: 20 px from the nearest outside pixel
    expect(dist[10 * 60 + 30]).toBeCloseTo(1, 5); // first row inside
    expect(dist[5 * 60 + 30]).toBe(0);
    const alpha = featherAlpha(dist, 2, 10);
    expect(alpha[10 * 60 + 30]).toBe(0);
    expect(alpha[30 * 60 + 30]).toBe(1);
    expect(alpha[15 * 60 + 30]).toBeGreaterThan(0);
    expect(alpha[15 * 60 + 30]).toBeLessThan(1);
  });

  it('distanceInside over a window is exact within its reach and never less than the true distance', () => {
    // A ring of outside pixels with specks, against brute force (the region's border counts as outside).
    const w = 47;
    const h = 39;
    const inside = new Uint8Array(w * h);
    for (let y = 0; y < h; y++) {
      for (let x = 0; x < w; x++) inside[y * w + x] = +(Math.hypot(x - 20, y - 18) < 16 && (x * 7 + y * 13) % 29 !== 0);
    }
    const truth = (x: number, y: number) => {
      let best = Math.min(x + 1, y + 1, w - x, h - y) ** 2;
      for (let j = 0; j < w * h; j++)
        if (!inside[j]) best = Math.min(best, ((j % w) - x) ** 2 + (Math.floor(j / w) - y) ** 2);
      return Math.sqrt(best);
    };
    const full = distanceInside(inside, w, h);
    for (let i = 0; i < w * h; i += 5) expect(full[i]).toBeCloseTo(truth(i % w, Math.floor(i / w)), 5);
    const win = { left: 9, top: 0, width: 25, height: 21 };
    const part = distanceInside(inside, w, h, win);
    expect(part.length).toBe(25 * 21);
    let exact = 0;
    for (let y = 0; y < win.height; y++) {
      for (let x = 0; x < win.width; x++) {
        // Reach: to the window's nearest edge inside the region (the top edge is the region's).
        const reach = Math.min(x, win.width - 1 - x, win.height - 1 - y);
        const t = truth(x + win.left, y + win.top);
        const d = part[y * win.width + x]!;
        expect(d).toBeGreaterThanOrEqual(t - 1e-5);
        if (t <= reach) {
          expect(d).toBeCloseTo(t, 5);
          exact++;
        }
      }
    }
    expect(exact).toBeGreaterThan(100);
  });
});

describe('colour', () => {
  it('round-trips sRGB through Lab', () => {
    const rgb = new Float32Array([0, 0, 0, 255, 255, 255, 200, 120, 90, 12, 200, 40, 30, 30, 220]);
    const back = labToRgb(rgbToLab(rgb));
    for (let i = 0; i < rgb.length; i++) expect(Math.abs(back[i]! - rgb[i]!)).toBeLessThan(0.6);
    const white = rgbToLab(new Float32Array([255, 255, 255]));
    expect(white[0]).toBeCloseTo(100, 1);
  });

  it("reads a region's Lab through the colour cache exactly as rgbToLab reads its pixels", () => {
    // 120 k pixels: random colours (more than the cache's 65 536 slots: they collide) and runs of
    // repeated ones, read twice (the second time from a warm cache) and where a mask allows.
    const width = 400;
    const height = 300;
    const data = new Uint8Array(width * height * 3);
    let seed = 7;
    for (let i = 0; i < data.length; i += 3) {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      const v = i % 7 === 0 ? seed : (i / 3) % 5 === 0 ? 0xc08060 : seed >>> 3;
      data.set([v & 255, (v >>> 8) & 255, (v >>> 16) & 255], i);
    }
    const img = { data, width, height };
    const region = { left: 13, top: 7, width: 350, height: 280 };
    const use = new Uint8Array(region.width * region.height).map((_, i) => +(i % 3 !== 1));
    for (const mask of [undefined, use, undefined]) {
      const want = rgbToLab(regionRgb(img, region), mask);
      const got = regionLab(img, region, mask);
      let differ = 0;
      for (let i = 0; i < want.length; i++) if (!Object.is(want[i], got[i])) differ++;
      expect(differ).toBe(0);
    }
  });

  it('moves mean and spread to the target statistics', () => {
    const n = 1000;
    const a = new Float32Array(n * 3);
    const b = new Float32Array(n * 3);
    for (let i = 0; i < n; i++) {
      for (let c = 0; c < 3; c++) {
        a[i * 3 + c] = 50 + 10 * Math.sin(i * (c + 1));
        b[i * 3 + c] = 60 + 12 * Math.cos(i * (c + 2));
      }
    }
    const w = new Float32Array(n).fill(1);
    const use = new Uint8Array(n).fill(1);
    const target = channelStats(b, w);
    transferStats(a, use, channelStats(a, w), target);
    const after = channelStats(a, w);
    for (let c = 0; c < 3; c++) {
      expect(after.mean[c]).toBeCloseTo(target.mean[c]!, 3);
      expect(after.std[c]).toBeCloseTo(target.std[c]!, 3);
    }
  });
});

describe('membrane (Poisson) solver', () => {
  function disc(w: number, h: number, boundary: (x: number, y: number) => [number, number, number]) {
    const state = new Uint8Array(w * h);
    const val = new Float32Array(w * h * 3);
    for (let y = 0; y < h; y++) {
      for (let x = 0; x < w; x++) {
        const r = Math.hypot(x - w / 2, y - h / 2);
        const i = y * w + x;
        if (r < w / 2 - 4) state[i] = 1;
        else if (r < w / 2 - 2) {
          state[i] = 2;
          val.set(boundary(x, y), i * 3);
        }
      }
    }
    return { state, val };
  }

  it('reproduces harmonic functions (constants and planes) from their boundary values', () => {
    const w = 160;
    const h = 160;
    const { state, val } = disc(w, h, (x, y) => [12, 0.2 * x - 0.1 * y, -7]);
    solveMembrane(state, val, w, h);
    let worst = 0;
    for (let y = 0; y < h; y++) {
      for (let x = 0; x < w; x++) {
        const i = y * w + x;
        if (state[i] !== 1) continue;
        worst = Math.max(worst, Math.abs(val[i * 3]! - 12), Math.abs(val[i * 3 + 1]! - (0.2 * x - 0.1 * y)));
        worst = Math.max(worst, Math.abs(val[i * 3 + 2]! + 7));
      }
    }
    expect(worst).toBeLessThan(0.5);
  });
});

describe('a face swapped at the work size', () => {
  it('comes back at full size: colour kept, edge premultiplied, an occluded block exactly untouched', () => {
    // A 40x40 rendered face at a quarter of a 160x160 full region, opaque but for a hole (an occluder).
    const rw = 40;
    const rh = 40;
    const face = new Float32Array(rw * rh * 3);
    const alpha = new Float32Array(rw * rh);
    for (let y = 0; y < rh; y++) {
      for (let x = 0; x < rw; x++) {
        const i = y * rw + x;
        face.set([100 + x, 50, 200 - y], i * 3);
        const inHole = x >= 20 && x < 30 && y >= 20 && y < 30;
        alpha[i] = inHole || x < 2 ? 0 : 1;
        // What lies under alpha 0 must never show: poison it.
        if (alpha[i] === 0) face.set([255, 255, 255], i * 3);
      }
    }
    const region = { left: 0, top: 0, width: rw, height: rh };
    const up = upsampleFace(
      { region, face, alpha, stats: undefined },
      { left: 0, top: 0, width: 160, height: 160 },
      4,
      4,
    );
    // Inside the hole, away from its edge by one small pixel: alpha exactly 0.
    for (let y = 21 * 4 + 2; y < 29 * 4 - 2; y++)
      for (let x = 21 * 4 + 2; x < 29 * 4 - 2; x++) {
        expect(up.alpha[y * 160 + x]).toBe(0);
      }
    // A smooth ramp stays the ramp (bicubic inside, premultiplied bilinear at edges: no white bleeds in).
    let worst = 0;
    for (let y = 0; y < 160; y++) {
      for (let x = 0; x < 160; x++) {
        const o = y * 160 + x;
        if (up.alpha[o]! <= 0) continue;
        const sx = (x + 0.5) / 4 - 0.5;
        const sy = (y + 0.5) / 4 - 0.5;
        worst = Math.max(worst, Math.abs(up.face[o * 3]! - (100 + Math.min(39, Math.max(2, sx)))));
        worst = Math.max(worst, Math.abs(up.face[o * 3 + 1]! - 50));
        worst = Math.max(worst, Math.abs(up.face[o * 3 + 2]! - (200 - Math.min(39, Math.max(0, sy)))));
      }
    }
    expect(worst).toBeLessThan(1.01);
  });

  it('is sharpened exactly to the wanted Laplacian variance, and never softened', () => {
    const w = 64;
    const h = 64;
    // A fine texture, to be made stronger still.
    const rgb = new Float32Array(w * h * 3);
    for (let y = 0; y < h; y++) {
      for (let x = 0; x < w; x++) {
        const v = 128 + 20 * Math.sin(1.3 * x) * Math.cos(1.1 * y);
        rgb.set([v, v, v], (y * w + x) * 3);
      }
    }
    const all = new Uint8Array(w * h).fill(1);
    const lapVar = (a: Float32Array) => {
      let s = 0;
      let s2 = 0;
      let n = 0;
      // Over the pixels whose whole 4-neighbourhood is in the core, as matchDetail measures.
      for (let y = 3; y < h - 3; y++) {
        for (let x = 3; x < w - 3; x++) {
          const g = (xx: number, yy: number) => a[(yy * w + xx) * 3]!;
          const l = 4 * g(x, y) - g(x - 1, y) - g(x + 1, y) - g(x, y - 1) - g(x, y + 1);
          s += l;
          s2 += l * l;
          n++;
        }
      }
      return s2 / n - (s / n) ** 2;
    };
    const core = new Uint8Array(w * h);
    for (let y = 2; y < h - 2; y++) for (let x = 2; x < w - 2; x++) core[y * w + x] = 1;
    const before = lapVar(rgb);
    const softer = Float32Array.from(rgb);
    expect(matchDetail(softer, w, h, all, core, before / 2)).toBe(0);
    expect(softer).toEqual(rgb);
    const k = matchDetail(rgb, w, h, all, core, before * 1.5);
    expect(k).toBeGreaterThan(0);
    expect(k).toBeLessThan(3); // under the gain cap: the target was reachable
    expect(lapVar(rgb) / (before * 1.5)).toBeCloseTo(1, 2);
  });
});

describe('the brows and the eye line from a zone plane', () => {
  /** A 60 × 60 zone plane with 6 × 4 blocks of `zones` at their top-left corners, turned by quarter turns. */
  function plane(blocks: [zone: number, x: number, y: number][], turns = 0): Uint8Array {
    const zoneOf = new Uint8Array(60 * 60);
    for (const [zone, x0, y0] of blocks) {
      for (let y = y0; y < y0 + 4; y++) {
        for (let x = x0; x < x0 + 6; x++) {
          const [tx, ty] = turns % 2 === 0 ? [x, y] : [59 - y, x];
          zoneOf[ty * 60 + tx] = zone;
        }
      }
    }
    return zoneOf;
  }
  const face: [number, number, number][] = [
    [1, 10, 10],
    [2, 40, 10],
    [3, 10, 25],
    [4, 40, 25],
  ];

  it('finds the brows, their centre and the eye line, its normal towards the brows, upright or turned', () => {
    const up = browsAndEyes(plane(face), 60, [1, 2], [3, 4])!;
    expect(up.brows.map((b) => [b.x, b.y])).toEqual([
      [12.5, 11.5],
      [42.5, 11.5],
    ]);
    expect(up.centre).toEqual({ x: 27.5, y: 11.5 });
    expect(up.eyes).toMatchObject({ x: 27.5, y: 26.5, ux: 1, uy: 0, ny: -1 });
    // A quarter turn: the brows now lie on the right of the eyes.
    const turned = browsAndEyes(plane(face, 1), 60, [1, 2], [3, 4])!;
    expect(turned.eyes.nx).toBeCloseTo(1, 9);
    expect(turned.eyes.ny).toBeCloseTo(0, 9);
  });

  it('takes the brows that have pixels, and gives nothing without a brow or an eye', () => {
    const oneBrow = browsAndEyes(plane(face.filter(([z]) => z !== 1)), 60, [1, 2], [3, 4])!;
    expect(oneBrow.brows).toHaveLength(1);
    expect(oneBrow.centre).toEqual({ x: 42.5, y: 11.5 });
    expect(browsAndEyes(plane(face.filter(([z]) => z > 2)), 60, [1, 2], [3, 4])).toBeUndefined();
    expect(browsAndEyes(plane(face.filter(([z]) => z !== 4)), 60, [1, 2], [3, 4])).toBeUndefined();
    expect(browsAndEyes(plane(face), 60, [1, 2], [3])).toBeUndefined();
  });
});

describe('order statistics (quickselect)', () => {
  it('gives the element a full sort puts at each rank, on random, repeated and sorted input', () => {
    let seed = 7;
    const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) * 100;
    const inputs = [
      Float32Array.from({ length: 1001 }, rand),
      Float64Array.from({ length: 500 }, () => Math.floor(rand() / 20)), // five values, many repeats
      Float32Array.from({ length: 300 }, (_, i) => i), // already sorted
      Float32Array.from({ length: 300 }, (_, i) => -i), // reversed
      new Float32Array(64).fill(3), // constant
      Float32Array.of(5),
    ];
    for (const input of inputs) {
      const sorted = Float64Array.from(input).sort();
      for (const k of [0, 1, input.length >> 2, input.length >> 1, input.length - 1]) {
        expect(kthSmallest(input.slice(), k)).toBe(sorted[k]);
      }
      expect(medianInPlace(input.slice())).toBe(sorted[input.length >> 1]);
    }
    // Only the first n elements count.
    expect(medianInPlace(Float32Array.of(9, 1, 5, -100, -100), 3)).toBe(5);
  });
});

describe('scratch memory for a swap', () => {
  it('hands out zeroed, disjoint views of one reused buffer inside a scope, ordinary arrays outside', () => {
    const outside = floats(4);
    expect(outside.buffer.byteLength).toBe(16); // an array of its own
    // The first scope sizes the arena; the second reuses it.
    withScratch(() => floats(1000).fill(7));
    const size = arenaBytes();
    expect(size).toBeGreaterThanOrEqual(4000);
    const [a, b] = withScratch(() => {
      const a = floats(500);
      const b = withScratch(() => floats(500)); // nested: still the outer scope's arena
      expect(a.buffer).toBe(b.buffer);
      expect(a.every((v) => v === 0) && b.every((v) => v === 0)).toBe(true); // zeroed despite the 7s
      a.fill(1);
      expect(b.every((v) => v === 0)).toBe(true); // disjoint
      return [a, b] as const;
    });
    expect(a.buffer).toBe(b.buffer);
    expect(arenaBytes()).toBe(size);
    // A scope may not be asynchronous: its views would outlive it.
    expect(() => withScratch(async () => {})).toThrow(/synchronous/);
    // Past the arena's end, allocation falls back to ordinary arrays.
    withScratch(() => {
      const big = floats(size); // more than is left after nothing: the arena holds `size` bytes = size / 4 floats
      const more = floats(size);
      expect(more.buffer).not.toBe(big.buffer);
    });
  });
});

describe('decode and encode', () => {
  it('encodes every output format', async () => {
    const img = gradientImage(64, 48);
    for (const format of ['jpeg', 'png', 'webp'] as const) {
      const bytes = await encodeImage(img, format, 80);
      const meta = await sharp(bytes).metadata();
      expect(meta.format).toBe(format);
      expect([meta.width, meta.height]).toEqual([64, 48]);
      expect(CONTENT_TYPES[format]).toBe(`image/${format}`);
    }
  });

  it('refuses an image over the pixel limit from its header, and undecodable bytes', async () => {
    const png = await sharp({ create: { width: 300, height: 200, channels: 3, background: '#888' } })
      .png()
      .toBuffer();
    await expect(decodeImage(png, 'input.target', 50_000)).rejects.toThrow(
      /^input\.target: image is 300x200 \(0\.06 MP\), over the 0\.05 MP limit$/,
    );
    await expect(decodeImage(Buffer.from('nope'), 'input.source', 1e6)).rejects.toMatchObject({
      errorType: 'invalid_media',
      message: 'input.source: not a decodable image',
    });
    const ok = await decodeImage(png, 'input.target', 1e6);
    expect([ok.width, ok.height, ok.data.length]).toEqual([300, 200, 300 * 200 * 3]);
  });

  it('applies EXIF orientation and flattens transparency onto white', async () => {
    const rgba = await sharp({
      create: { width: 40, height: 20, channels: 4, background: { r: 0, g: 0, b: 0, alpha: 0 } },
    })
      .png()
      .toBuffer();
    const flat = await decodeImage(rgba, 'x', 1e6);
    expect([flat.data[0], flat.data[1], flat.data[2]]).toEqual([255, 255, 255]);
    const rotated = await sharp(gradientImage(40, 20).data, { raw: { width: 40, height: 20, channels: 3 } })
      .withMetadata({ orientation: 6 })
      .jpeg()
      .toBuffer();
    const upright = await decodeImage(rotated, 'x', 1e6);
    expect([upright.width, upright.height]).toEqual([20, 40]);
  });
});
