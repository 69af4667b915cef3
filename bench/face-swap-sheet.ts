/**
 * Contact sheet of the face swap on every face of face-api's six sample photographs (MIT licence),
 * plus targets rolled by ±25°: each face swapped alone (by index, as a user would pick it) through
 * the job type itself, shown as original | result. Prints identity (descriptor distance to the
 * source, before and after) and how far the result's landmarks are from the target's.
 *
 *   npx tsx bench/face-swap-sheet.ts [out.jpg]     (default docs/face-swap-sheet.jpg)
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { createFaceSwapJobType } from '../src/processors/face-swap/index.js';
import {
  computeDescriptor,
  descriptorDistance,
  detectLandmarks,
  findFaces,
  largestFaceLandmarks,
  leftToRight,
} from '../src/processors/face-swap/detect.js';
import { decodeImage } from '../src/processors/face-swap/image.js';
import type { Box, Point, RgbImage } from '../src/processors/face-swap/types.js';
import { sheetSource, sheetTargets } from '../test/face-swap/fixtures.js';

const out = process.argv[2] ?? fileURLToPath(new URL('../docs/face-swap-sheet.jpg', import.meta.url));
const source = await sheetSource();
const targets = await sheetTargets();

const dec = (b: Buffer) => decodeImage(b, 'x', 1e8);
const srcImg = await dec(source);
const srcDesc = await computeDescriptor(srcImg, await largestFaceLandmarks(srcImg, await findFaces(srcImg, 0.5)));

const interOcular = (lm: Point[]) => {
  const c = (a: number, b: number) =>
    lm.slice(a, b).reduce((s, p) => ({ x: s.x + p.x / (b - a), y: s.y + p.y / (b - a) }), { x: 0, y: 0 });
  const l = c(36, 42);
  const r = c(42, 48);
  return Math.hypot(l.x - r.x, l.y - r.y);
};
const meanErr = (a: Point[], b: Point[], from = 0, to = 68) => {
  let s = 0;
  for (let i = from; i < to; i++) s += Math.hypot(a[i]!.x - b[i]!.x, a[i]!.y - b[i]!.y);
  return s / (to - from) / interOcular(a);
};

const SIDE = 240;
const LABEL = 22;
/** One picture of the sheet: the face's surroundings at SIDE px, labelled. */
async function tile(im: RgbImage, box: Box, label: string): Promise<Buffer> {
  const g = Math.round(0.3 * Math.max(box.width, box.height));
  const left = Math.max(0, Math.round(box.x - g));
  const top = Math.max(0, Math.round(box.y - g));
  const r = {
    left,
    top,
    width: Math.min(im.width - left, Math.round(box.width + 2 * g)),
    height: Math.min(im.height - top, Math.round(box.height + 2 * g)),
  };
  const pic = await sharp(im.data, { raw: { width: im.width, height: im.height, channels: 3 } })
    .extract(r)
    .resize(SIDE, SIDE, { fit: 'contain', background: '#111' })
    .png()
    .toBuffer();
  const svg = `<svg width="${SIDE}" height="${LABEL}"><rect width="100%" height="100%" fill="#111"/><text x="4" y="16" font-family="sans-serif" font-size="13" fill="#eee">${label}</text></svg>`;
  return sharp({ create: { width: SIDE, height: SIDE + LABEL, channels: 3, background: '#111' } })
    .composite([
      { input: pic, left: 0, top: 0 },
      { input: Buffer.from(svg), left: 0, top: SIDE },
    ])
    .png()
    .toBuffer();
}

const tiles: Buffer[] = [];
const rows: string[] = [];
const jt = createFaceSwapJobType();
try {
  for (const t of targets) {
    const img = await dec(t.bytes);
    const faces = leftToRight(await findFaces(img, t.confidence));
    for (const [index, f] of faces.entries()) {
      if (Math.max(f.box.width, f.box.height) < 100) continue;
      const img0 = img;
      let result;
      try {
        result = await jt.run({
          model: 'warp-blend-v1',
          options: jt.options.parse({
            format: 'png',
            target_face_indices: [index],
            min_confidence: t.confidence,
          }),
          media: {
            source: [{ url: 'sheet:source', bytes: source, mime: 'image/jpeg' }],
            target: [{ url: 'sheet:target', bytes: t.bytes, mime: 'image/jpeg' }],
          },
          signal: new AbortController().signal,
          progress: () => {},
        });
      } catch (err) {
        const line = `${t.name} face ${index} (${Math.round(f.box.width)} px, score ${f.score.toFixed(2)}): ${(err as Error).message}`;
        console.log(line);
        rows.push(line);
        tiles.push(await tile(img0, f.box, `${t.name} #${index}`));
        tiles.push(await tile(img0, f.box, 'failed'));
        continue;
      }
      const res = await dec(result.bytes);
      const lmT = await detectLandmarks(img, f.box);
      const lmR = await detectLandmarks(res, f.box);
      const before = descriptorDistance(srcDesc, await computeDescriptor(img, lmT));
      const after = descriptorDistance(srcDesc, await computeDescriptor(res, lmR));
      const line = `${t.name} face ${index} (${Math.round(f.box.width)} px, score ${f.score.toFixed(2)}): identity ${before.toFixed(2)} -> ${after.toFixed(2)}, landmarks ${meanErr(lmT, lmR).toFixed(3)}, mouth ${meanErr(lmT, lmR, 48, 68).toFixed(3)}`;
      console.log(line);
      rows.push(line);
      tiles.push(await tile(img, f.box, `${t.name} #${index}`));
      tiles.push(await tile(res, f.box, `result ${after.toFixed(2)} (was ${before.toFixed(2)})`));
    }
  }
} finally {
  await jt.close();
}
const COLS = 6;
const GAP = 4;
const rowsN = Math.ceil(tiles.length / COLS);
const sheet = await sharp({
  create: { width: COLS * (SIDE + GAP), height: rowsN * (SIDE + LABEL + GAP), channels: 3, background: '#111' },
})
  .composite(
    tiles.map((input, i) => ({
      input,
      left: (i % COLS) * (SIDE + GAP),
      top: Math.floor(i / COLS) * (SIDE + LABEL + GAP),
    })),
  )
  .jpeg({ quality: 88, mozjpeg: true })
  .toBuffer();
writeFileSync(out, sheet);
writeFileSync(out.replace(/\.jpg$/, '.txt'), rows.join('\n') + '\n');
console.log(`wrote ${out}`);
