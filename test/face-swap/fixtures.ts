/**
 * Test inputs built from face-api's sample photographs (node_modules/@vladmandic/face-api/demo,
 * MIT licence) plus a synthetic no-face landscape. Face indices are "largest first", as detect.ts
 * sorts them; the crops below are fixed rectangles so the fixtures do not depend on detection.
 */
import { readFileSync } from 'node:fs';
import sharp from 'sharp';
import type { FetchedMedia, RunContext } from '../../src/processors/types.js';
import { faceApiDemoPhoto } from '../../src/processors/face-swap/detect.js';
import {
  createFaceSwapJobType,
  faceSwapOptionsSchema,
  type FaceSwapJobType,
  type FaceSwapOptions,
} from '../../src/processors/face-swap/index.js';
import { createFaceDetectJobType, type FaceDetectJobType } from '../../src/processors/face-swap/detect-job.js';
import { createFaceThreadPool } from '../../src/processors/face-swap/pool.js';

export function sample(n: 1 | 2 | 3 | 4 | 5 | 6): Buffer {
  return readFileSync(faceApiDemoPhoto(`sample${n}.jpg`));
}

export interface Rect {
  left: number;
  top: number;
  width: number;
  height: number;
}

export async function crop(bytes: Buffer, r: Rect, scale = 1): Promise<Buffer> {
  let s = sharp(bytes).extract(r);
  if (scale !== 1) s = s.resize(Math.round(r.width * scale));
  return s.jpeg({ quality: 92 }).toBuffer();
}

/** Head-and-shoulders crops around single faces (the face's box grown by 80% on each side). */
export const PORTRAITS = {
  /** sample3, left: curly blonde hair, frontal. */
  curlyBlonde: { n: 3, rect: { left: 425, top: 167, width: 520, height: 520 } },
  /** sample3, right: dark hair, smiling. */
  darkHair: { n: 3, rect: { left: 1378, top: 154, width: 442, height: 442 } },
  /** sample6, right: brunette, frontal (the largest face of sample6). */
  brunette: { n: 6, rect: { left: 1317, top: 90, width: 552, height: 552 } },
  /** sample6, second from left: does not appear in sample4. */
  sample6second: { n: 6, rect: { left: 553, top: 193, width: 413, height: 413 } },
  /** sample4, the third largest face (second from the right). */
  sample4third: { n: 4, rect: { left: 852, top: 43, width: 443, height: 443 } },
} as const satisfies Record<string, { n: 1 | 2 | 3 | 4 | 5 | 6; rect: Rect }>;

export function portrait(name: keyof typeof PORTRAITS, scale = 1): Promise<Buffer> {
  const p = PORTRAITS[name];
  return crop(sample(p.n), p.rect, scale);
}

/** Deterministic PRNG (mulberry32), so the synthetic image is the same on every run. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A landscape-like picture with no face: sky gradient, two mountain ridges, textured grass. */
export async function landscape(width = 1024, height = 683): Promise<Buffer> {
  const rand = rng(42);
  const px = Buffer.alloc(width * height * 3);
  const ridge1 = (x: number) => height * (0.42 + 0.08 * Math.sin(x / 97) + 0.04 * Math.sin(x / 23 + 1));
  const ridge2 = (x: number) => height * (0.55 + 0.05 * Math.sin(x / 61 + 2) + 0.02 * Math.sin(x / 17));
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const o = (y * width + x) * 3;
      const n = rand() * 20 - 10;
      let rgb: [number, number, number];
      if (y < ridge1(x)) {
        const t = y / height;
        rgb = [90 + 100 * t, 150 + 70 * t, 235];
      } else if (y < ridge2(x)) {
        rgb = [95 + n, 100 + n, 120 + n];
      } else {
        const t = (y - height * 0.55) / (height * 0.45);
        rgb = [50 + 30 * t + n * 2, 110 + 40 * t + n * 2, 40 + n];
      }
      px[o] = Math.max(0, Math.min(255, rgb[0]));
      px[o + 1] = Math.max(0, Math.min(255, rgb[1]));
      px[o + 2] = Math.max(0, Math.min(255, rgb[2]));
    }
  }
  return sharp(px, { raw: { width, height, channels: 3 } })
    .jpeg({ quality: 90 })
    .toBuffer();
}

export function media(bytes: Buffer, mime = 'image/jpeg'): FetchedMedia[] {
  return [{ url: 'https://example.com/input.jpg', bytes, mime }];
}

export interface TestRun {
  ctx: RunContext<FaceSwapOptions>;
  stages: string[];
  abort: AbortController;
}

export function runContext(
  slots: { source?: Buffer; target?: Buffer; reference?: Buffer },
  options: Record<string, unknown> = {},
): TestRun {
  const abort = new AbortController();
  const stages: string[] = [];
  const m: RunContext<FaceSwapOptions>['media'] = {};
  if (slots.source) m.source = media(slots.source);
  if (slots.target) m.target = media(slots.target);
  if (slots.reference) m.reference = media(slots.reference);
  return {
    abort,
    stages,
    ctx: {
      model: 'warp-blend-v1',
      options: faceSwapOptionsSchema.parse(options),
      media: m,
      signal: abort.signal,
      progress: (s) => stages.push(s),
    },
  };
}

type Pt = { x: number; y: number };
const svgPoly = (pts: readonly Pt[], fill: string) =>
  `<polygon points="${pts.map((p) => `${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(' ')}" fill="${fill}"/>`;

/** One saturated green for lips and lids: no skin, and no make-up of the source photos, is anywhere near it. */
export const PAINT = [20, 210, 40] as const;

/**
 * The target with its lips and upper eyelids painted a saturated colour, along its own 68 landmarks
 * (given, from the unpainted picture): the lips' outer line grown by 3% of the face width (lipstick
 * over the line, and landmark error), the lids from the lash line half way up to the brows.
 */
export async function paintedFace(bytes: Buffer, lm: readonly Pt[]): Promise<Buffer> {
  const meta = await sharp(bytes).metadata();
  const faceW = Math.hypot(lm[16]!.x - lm[0]!.x, lm[16]!.y - lm[0]!.y);
  const rgb = (c: readonly number[]) => `rgb(${c.join(',')})`;
  const lips = lm.slice(48, 60);
  const lids = [
    [36, 37, 38, 39, 17, 18, 19, 20, 21],
    [42, 43, 44, 45, 22, 23, 24, 25, 26],
  ].map(([a, b, c, d, ...brow]) => {
    const upper = [a!, b!, c!, d!].map((i) => lm[i]!);
    const browY = brow.reduce((s, i) => s + lm[i]!.y, 0) / brow.length;
    const eyeY = upper.reduce((s, p) => s + p.y, 0) / upper.length;
    const lift = 0.5 * (eyeY - browY);
    return [...upper, ...upper.map((p) => ({ x: p.x, y: p.y - lift })).reverse()];
  });
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${meta.width}" height="${meta.height}">
    <g stroke="${rgb(PAINT)}" stroke-width="${(0.03 * faceW).toFixed(1)}" stroke-linejoin="round">${svgPoly(lips, rgb(PAINT))}</g>
    ${lids.map((p) => svgPoly(p, rgb(PAINT))).join('')}</svg>`;
  return sharp(bytes)
    .composite([{ input: Buffer.from(svg), left: 0, top: 0 }])
    .png()
    .toBuffer();
}

/** Where barredFace puts its bar: across the lower face, covering the mouth, wider than the face. */
export function barRect(lm: readonly Pt[]): { left: number; top: number; width: number; height: number } {
  const xs = lm.slice(0, 17).map((p) => p.x);
  const x0 = Math.min(...xs);
  const x1 = Math.max(...xs);
  const top = lm[33]!.y + 0.3 * (lm[51]!.y - lm[33]!.y);
  const bottom = lm[57]!.y + 0.5 * (lm[8]!.y - lm[57]!.y);
  const pad = 0.15 * (x1 - x0);
  return {
    left: Math.round(x0 - pad),
    top: Math.round(top),
    width: Math.round(x1 - x0 + 2 * pad),
    height: Math.round(bottom - top),
  };
}

export const BAR_COLOUR = [28, 44, 110] as const;

/** `bytes` with an opaque rectangle of BAR_COLOUR over `r`, as PNG. */
async function withRect(bytes: Buffer, r: Rect): Promise<Buffer> {
  const rect = await sharp({
    create: {
      width: r.width,
      height: r.height,
      channels: 3,
      background: { r: BAR_COLOUR[0], g: BAR_COLOUR[1], b: BAR_COLOUR[2] },
    },
  })
    .png()
    .toBuffer();
  return sharp(bytes)
    .composite([{ input: rect, left: r.left, top: r.top }])
    .png()
    .toBuffer();
}

/** The target with an opaque bar (a microphone, a scarf) across its lower face, as PNG. */
export function barredFace(bytes: Buffer, lm: readonly Pt[]): Promise<Buffer> {
  return withRect(bytes, barRect(lm));
}

/** A strand (opaque, BAR_COLOUR) from beyond the face's left outline across its temple and brow end, as PNG. */
export function strandOverFace(bytes: Buffer, lm: readonly Pt[]): Promise<Buffer> {
  const xs = lm.slice(0, 17).map((p) => p.x);
  const x0 = Math.min(...xs);
  const w = Math.max(...xs) - x0;
  const brow = lm[19]!.y;
  return withRect(bytes, {
    left: Math.round(x0 - 0.15 * w),
    top: Math.round(brow - 0.03 * w),
    width: Math.round(0.35 * w),
    height: Math.round(0.1 * w),
  });
}

async function rolled(n: 3 | 4, r: Rect, deg: number): Promise<Buffer> {
  const c = await sharp(sample(n)).extract(r).toBuffer();
  return sharp(c).rotate(deg, { background: '#808080' }).jpeg({ quality: 95 }).toBuffer();
}

/** The contact sheet's source: sample6's right-hand woman (closed mouth, no hair over the face). */
export function sheetSource(): Promise<Buffer> {
  return sharp(sample(6)).extract(PORTRAITS.brunette.rect).jpeg({ quality: 95 }).toBuffer();
}

/**
 * The contact sheet's targets (bench/face-swap-sheet.ts, sheet-identity.test.ts): the six sample
 * photos and three faces rolled by ±25°, each with the detector's threshold to search it at: the
 * default, but 0.3 for sample2, whose profile scores 0.32 (at 0.3 sample3 and sample6 each show one
 * false face, so not there).
 */
export async function sheetTargets(): Promise<{ name: string; bytes: Buffer; confidence: number }[]> {
  const out = ([1, 2, 3, 4, 5, 6] as const).map((n) => ({
    name: `sample${n}`,
    bytes: sample(n),
    confidence: n === 2 ? 0.3 : 0.5,
  }));
  const dark = PORTRAITS.darkHair.rect;
  out.push({ name: 'sample3 right +25°', bytes: await rolled(3, dark, 25), confidence: 0.5 });
  out.push({ name: 'sample3 right -25°', bytes: await rolled(3, dark, -25), confidence: 0.5 });
  out.push({ name: 'sample4 third +25°', bytes: await rolled(4, PORTRAITS.sample4third.rect, 25), confidence: 0.5 });
  return out;
}

/**
 * The README example's pair (docs/face-swap-example.jpg): sample3's middle woman, lit blue from her
 * left, as the source; sample6's right-hand woman as the target. Square crops, JPEG at quality 95.
 */
export async function exampleFaces(): Promise<{ source: Buffer; target: Buffer }> {
  const crop = (n: 3 | 6, left: number, top: number, size: number) =>
    sharp(sample(n)).extract({ left, top, width: size, height: size }).jpeg({ quality: 95 }).toBuffer();
  return { source: await crop(3, 896, 37, 578), target: await crop(6, 1317, 90, 552) };
}

/**
 * image-face-swap and face-detect on one shared thread, as the catalogue makes them, the thread warmed
 * up. `close` stops both.
 */
export async function faceJobTypes(): Promise<{
  jt: FaceSwapJobType;
  fd: FaceDetectJobType;
  close: () => Promise<void>;
}> {
  const pool = createFaceThreadPool(1);
  const jt = createFaceSwapJobType({ pool });
  const fd = createFaceDetectJobType({ pool });
  await jt.warmup();
  return {
    jt,
    fd,
    close: async () => {
      await jt.close();
      await fd.close();
    },
  };
}
