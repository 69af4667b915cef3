/**
 * A flat black, white or grey thing across the jaw (a scarf, a collar, a bar, or a thin band: a strap,
 * a cable) through the job type: the outline move (outline.ts) must not bend it. Its edges stay where they were, within 2 px, on
 * every column it crosses.
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectFaces } from '../../src/processors/face-swap/detect.js';
import { decodeImage } from '../../src/processors/face-swap/image.js';
import type { FaceSwapJobType } from '../../src/processors/face-swap/index.js';
import type { Point, RgbImage } from '../../src/processors/face-swap/types.js';
import { faceJobTypes, portrait, runContext } from './fixtures.js';

const LONG = 240_000;
/** How far (px) an edge may lie from where it was. */
const STRAIGHT = 2;

const decode = (bytes: Uint8Array) => decodeImage(bytes, 'test', 1e8);

interface Bar {
  left: number;
  top: number;
  width: number;
  height: number;
}

/** A band across the jaw: from just below the lower lip to below the chin, wider than the face. */
function jawBar(lm: readonly Point[]): Bar {
  const xs = lm.slice(0, 17).map((p) => p.x);
  const x0 = Math.min(...xs);
  const x1 = Math.max(...xs);
  const chin = lm[8]!.y - lm[57]!.y;
  const top = Math.round(lm[57]!.y + 0.3 * chin);
  const pad = 0.2 * (x1 - x0);
  return {
    left: Math.round(x0 - pad),
    top,
    width: Math.round(x1 - x0 + 2 * pad),
    height: Math.round(lm[8]!.y + 0.6 * chin - top),
  };
}

/**
 * A thin band (a strap, a cable) across the lower jaw, `at` of the way from the lower lip to the
 * chin: it crosses the jaw line on both sides and runs on over the neck and the hair, 1.4 face widths long.
 */
function thinBar(lm: readonly Point[], height: number, at: number): Bar {
  const xs = lm.slice(0, 17).map((p) => p.x);
  const x0 = Math.min(...xs);
  const x1 = Math.max(...xs);
  const y = lm[57]!.y + at * (lm[8]!.y - lm[57]!.y);
  const pad = 0.2 * (x1 - x0);
  return { left: Math.round(x0 - pad), top: Math.round(y - height / 2), width: Math.round(x1 - x0 + 2 * pad), height };
}

/** Where the jaw line (0-16) crosses the row `y`: its leftmost and rightmost crossing, grown by 4 px. */
function jawSpanAt(lm: readonly Point[], y: number): [number, number] {
  const xs: number[] = [];
  for (let i = 0; i < 16; i++) {
    const [a, b] = [lm[i]!, lm[i + 1]!];
    if ((a.y - y) * (b.y - y) > 0 || a.y === b.y) continue;
    xs.push(a.x + ((y - a.y) / (b.y - a.y)) * (b.x - a.x));
  }
  return [Math.min(...xs) - 4, Math.max(...xs) + 4];
}

/** `bytes` with an opaque rectangle of `rgb` over `bar`, as PNG (no JPEG noise: flat). */
async function withBar(bytes: Buffer, bar: Bar, rgb: readonly [number, number, number]): Promise<Buffer> {
  const rect = await sharp({
    create: { width: bar.width, height: bar.height, channels: 3, background: { r: rgb[0], g: rgb[1], b: rgb[2] } },
  })
    .png()
    .toBuffer();
  return sharp(bytes)
    .composite([{ input: rect, left: bar.left, top: bar.top }])
    .png()
    .toBuffer();
}

/** Whether the pixel at (x, y) is the bar's colour (within 6 levels per channel). */
function isBar(img: RgbImage, x: number, y: number, rgb: readonly number[]): boolean {
  const o = (y * img.width + x) * 3;
  return [0, 1, 2].every((c) => Math.abs(img.data[o + c]! - rgb[c]!) <= 6);
}

/** Row of the bar's top (`dir` 1) or bottom (-1) edge in column x: the first of two rows of its colour met coming from outside, searched 12 px either side of `at`. */
function edgeAt(img: RgbImage, x: number, at: number, dir: 1 | -1, rgb: readonly number[]): number | undefined {
  for (let y = at - 12 * dir; y !== at + 12 * dir; y += dir) {
    if (isBar(img, x, y, rgb) && isBar(img, x, y + dir, rgb)) return y;
  }
  return undefined;
}

/**
 * The largest distance (px) of the bar's top and bottom edges in `after` from where they are in
 * `before`, over the columns (the ends left out) where `before` shows them clearly (where the bar
 * meets dark hair or a bright background of its own colour it does not).
 */
function edgeBend(
  before: RgbImage,
  after: RgbImage,
  bar: Bar,
  rgb: readonly number[],
  only: (x: number) => boolean = () => true,
): { worst: number; columns: number } {
  const last = bar.top + bar.height - 1;
  let worst = 0;
  let columns = 0;
  for (let x = bar.left + 3; x < bar.left + bar.width - 3; x++) {
    if (!only(x)) continue;
    for (const [at, dir] of [
      [bar.top, 1],
      [last, -1],
    ] as const) {
      if (edgeAt(before, x, at, dir, rgb) !== at) continue;
      columns++;
      worst = Math.max(worst, Math.abs((edgeAt(after, x, at, dir, rgb) ?? at + 12) - at));
    }
  }
  return { worst, columns };
}

describe('image-face-swap keeps a flat neutral thing across the jaw straight', { timeout: LONG }, () => {
  let jt: FaceSwapJobType;
  let close: (() => Promise<void>) | undefined;
  let base: Buffer;
  let bar: Bar;
  let source: Buffer;
  let lm: Point[];

  beforeAll(async () => {
    [{ jt, close }, base, source] = await Promise.all([faceJobTypes(), portrait('brunette'), portrait('curlyBlonde')]);
    lm = (await detectFaces(await decode(base)))[0]!.landmarks;
    bar = jawBar(lm);
  }, LONG);

  afterAll(async () => {
    await close?.();
  });

  it.each([
    ['black', [10, 10, 10]],
    ['white', [245, 245, 245]],
    ['grey', [128, 128, 128]],
  ] as const)('a %s bar', async (_name, rgb) => {
    const target = await withBar(base, bar, rgb);
    const before = await decode(target);
    const after = await decode((await jt.run(runContext({ source, target }, { format: 'png' }).ctx)).bytes);
    // The swap happened (the face above the bar changed)...
    let changed = 0;
    for (let i = 0; i < before.data.length; i++) if (before.data[i] !== after.data[i]) changed++;
    expect(changed).toBeGreaterThan(10_000);
    // ...and the bar's edges stayed where they were.
    const { worst, columns } = edgeBend(before, after, bar, rgb);
    // Most of both edges are seen (the bar is 1.4 face widths wide; dark hair hides the black one's ends).
    expect(columns).toBeGreaterThan(1.2 * bar.width);
    expect(worst).toBeLessThanOrEqual(STRAIGHT);
  });

  it.each([
    ['black', 0.3, [10, 10, 10]],
    ['white', 0.3, [245, 245, 245]],
    ['grey', 0.3, [128, 128, 128]],
    ['black', 0.5, [10, 10, 10]],
    ['white', 0.5, [245, 245, 245]],
    ['grey', 0.5, [128, 128, 128]],
  ] as const)('a thin %s band across the jaw line, %s of the way from the lip to the chin', async (_name, at, rgb) => {
    // The detector can put the chin on such a band, whose 2-4 interior rows lay between the three
    // points where the pin looked for it: the grey one at 0.3 and the white one at 0.5 bent with
    // the jaw, 12 px and more (now 1).
    const thin = thinBar(lm, 6, at);
    const target = await withBar(base, thin, rgb);
    const before = await decode(target);
    const after = await decode((await jt.run(runContext({ source, target }, { format: 'png' }).ctx)).bytes);
    // Beside the face, where only the outline move reaches (inside the jaw line the swap replaces
    // the band or keeps it as an occluder).
    const [x0, x1] = jawSpanAt(lm, thin.top + thin.height / 2);
    const { worst, columns } = edgeBend(before, after, thin, rgb, (x) => x < x0 || x > x1);
    expect(columns).toBeGreaterThan(0.2 * thin.width);
    expect(worst).toBeLessThanOrEqual(STRAIGHT);
  });
});
