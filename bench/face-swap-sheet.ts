/**
 * Contact sheet of the face swap on every face of face-api's six sample photographs (MIT licence),
 * plus targets rolled by ±25°: each face swapped alone (by index, as a user would pick it) through
 * the job type itself, shown as original | result. Prints identity (descriptor distance to the
 * source, before and after) and how far the result's landmarks are from the target's.
 *
 *   npx tsx bench/face-swap-sheet.ts [out.jpg]     (default docs/face-swap-sheet.jpg)
 *
 * SHEET_SOURCE=smiling swaps the README example's source instead (her teeth showing: what
 * source-mouth.ts handles) into every face; give it an out path of its own (the committed sheet is
 * the closed-mouthed source's).
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { createFaceSwapJobType } from '../src/processors/face-swap/index.js';
import {
  computeDescriptor,
  descriptorDistance,
  detectLandmarks,
  refineLandmarks,
} from '../src/processors/face-swap/detect.js';
import type { Box, RgbImage } from '../src/processors/face-swap/types.js';
import { exampleFaces, runContext } from '../test/face-swap/fixtures.js';
import {
  decodeSheetImage as dec,
  landmarkError,
  SELF_BEFORE,
  sheetFaces,
  sheetSourceFace,
  uprightDescriptor,
} from '../test/face-swap/sheet.js';

const out = process.argv[2] ?? fileURLToPath(new URL('../docs/face-swap-sheet.jpg', import.meta.url));
const smiling = process.env.SHEET_SOURCE === 'smiling' ? (await exampleFaces()).source : undefined;
const { bytes: source, descriptor: srcDesc } = await sheetSourceFace(smiling);

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
const reads: Array<{ before: number; after: number; upAfter: number }> = [];
const rows: string[] = [];
const jt = createFaceSwapJobType();
try {
  for await (const { target: t, image: img, index, face: f } of sheetFaces()) {
    let result;
    try {
      const run = runContext(
        { source, target: t.bytes },
        { format: 'png', target_face_indices: [index], min_confidence: t.confidence },
      );
      result = await jt.run(run.ctx);
    } catch (err) {
      const line = `${t.name} face ${index} (${Math.round(f.box.width)} px, score ${f.score.toFixed(2)}): ${(err as Error).message}`;
      console.log(line);
      rows.push(line);
      tiles.push(await tile(img, f.box, `${t.name} #${index}`));
      // A refused face (a profile) shows the job's answer where the result would be.
      const refused = /is in profile/.test((err as Error).message);
      tiles.push(await tile(img, f.box, refused ? 'refused: in profile, not swapped' : 'failed'));
      continue;
    }
    const res = await dec(result.bytes);
    const lmT = await detectLandmarks(img, f.box);
    const lmR = await detectLandmarks(res, f.box);
    const before = descriptorDistance(srcDesc, await computeDescriptor(img, lmT));
    const after = descriptorDistance(srcDesc, await computeDescriptor(res, lmR));
    // A rolled face read in its level frame too (uprightDescriptor: the descriptor reads roll as identity).
    const lmLevel = await refineLandmarks(img, lmT);
    const upBefore = descriptorDistance(srcDesc, await uprightDescriptor(img, f.box, lmLevel));
    const upAfter = descriptorDistance(srcDesc, await uprightDescriptor(res, f.box, lmLevel));
    reads.push({ before, after, upAfter });
    const upright =
      Math.abs(upBefore - before) + Math.abs(upAfter - after) > 0.005
        ? ` (read upright ${upBefore.toFixed(2)} -> ${upAfter.toFixed(2)})`
        : '';
    const line = `${t.name} face ${index} (${Math.round(f.box.width)} px, score ${f.score.toFixed(2)}): identity ${before.toFixed(2)} -> ${after.toFixed(2)}${upright}, landmarks ${landmarkError(lmT, lmR).toFixed(3)}, mouth ${landmarkError(lmT, lmR, 48, 68).toFixed(3)}`;
    console.log(line);
    rows.push(line);
    tiles.push(await tile(img, f.box, `${t.name} #${index}`));
    tiles.push(await tile(res, f.box, `result ${after.toFixed(2)} (was ${before.toFixed(2)})`));
  }
} finally {
  await jt.close();
}
/** Median, worst and the count under 0.45 of a set of identity reads. */
function summary(values: number[]): string {
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
  return `median ${mid.toFixed(3)}, worst ${s.at(-1)!.toFixed(3)}, ${s.filter((x) => x < 0.45).length} of ${s.length} under 0.45`;
}
// The self-swap (the source's own face) is left out of the figures.
const others = reads.filter((r) => r.before > SELF_BEFORE);
for (const line of [
  `identity of the ${others.length} other faces swapped: ${summary(others.map((r) => r.after))}`,
  `read upright: ${summary(others.map((r) => r.upAfter))}`,
]) {
  console.log(line);
  rows.push(line);
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
