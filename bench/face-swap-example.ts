/**
 * Regenerates docs/face-swap-example.jpg: source | target | result, made by the job type itself
 * (worker thread and all) from face-api's sample photographs (MIT licence).
 *
 *   npx tsx bench/face-swap-example.ts
 */
import { exampleFaces } from '../test/face-swap/fixtures.js';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { createFaceSwapJobType } from '../src/processors/face-swap/index.js';

const out = fileURLToPath(new URL('../docs/face-swap-example.jpg', import.meta.url));

// Source: the middle woman of sample3. Target: the right-hand woman of sample6.
const { source, target } = await exampleFaces();

const jt = createFaceSwapJobType();
try {
  const result = await jt.run({
    model: 'warp-blend-v1',
    options: jt.options.parse({ format: 'png' }),
    media: {
      source: [{ url: 'example:source', bytes: source, mime: 'image/jpeg' }],
      target: [{ url: 'example:target', bytes: target, mime: 'image/jpeg' }],
    },
    signal: new AbortController().signal,
    progress: () => {},
  });

  const SIDE = 400;
  const LABEL = 36;
  const panel = async (bytes: Buffer, label: string) => {
    const img = await sharp(bytes).resize(SIDE, SIDE, { fit: 'cover' }).toBuffer();
    const svg = `<svg width="${SIDE}" height="${LABEL}"><rect width="100%" height="100%" fill="#111"/>
      <text x="${SIDE / 2}" y="25" font-family="sans-serif" font-size="20" fill="#eee" text-anchor="middle">${label}</text></svg>`;
    return sharp({ create: { width: SIDE, height: SIDE + LABEL, channels: 3, background: '#111' } })
      .composite([
        { input: img, left: 0, top: 0 },
        { input: Buffer.from(svg), left: 0, top: SIDE },
      ])
      .png()
      .toBuffer();
  };
  const panels = [await panel(source, 'source'), await panel(target, 'target'), await panel(result.bytes, 'result')];
  const GAP = 8;
  const montage = await sharp({
    create: { width: 3 * SIDE + 2 * GAP, height: SIDE + LABEL, channels: 3, background: '#111' },
  })
    .composite(panels.map((input, i) => ({ input, left: i * (SIDE + GAP), top: 0 })))
    .jpeg({ quality: 86, mozjpeg: true })
    .toBuffer();
  writeFileSync(out, montage);
  console.log(`wrote ${out} (${(montage.length / 1024).toFixed(0)} KB)`);
} finally {
  await jt.close();
}
