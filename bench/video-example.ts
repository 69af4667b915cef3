/**
 * Regenerates docs/video-example.jpg: frames 0, 7, …, 49 of the clip the tests build (a pan over
 * face-api's sample6, MIT licence), before (top) and after (bottom) the video-face-swap job type
 * itself (worker threads, ffmpeg and all).
 *
 *   npx tsx bench/video-example.ts
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { portrait } from '../test/face-swap/fixtures.js';
import { decodeFrames, makeClip } from '../test/video/fixtures.js';
import { createVideoFaceSwapJobType } from '../src/processors/video/face-swap.js';
import { videoFaceSwapOptionsSchema } from '../src/processors/video/options.js';

const out = fileURLToPath(new URL('../docs/video-example.jpg', import.meta.url));
const clip = await makeClip();
const jt = createVideoFaceSwapJobType({ threads: 2 });
try {
  const result = await jt.run({
    model: 'warp-blend-track-v1',
    options: videoFaceSwapOptionsSchema.parse({ quality: 90 }),
    media: {
      source: [{ url: 'example:source', bytes: await portrait('curlyBlonde'), mime: 'image/jpeg' }],
      target: [{ url: 'example:target', bytes: clip, mime: 'video/mp4' }],
    },
    signal: new AbortController().signal,
    progress: () => {},
  });
  const [before, after] = await Promise.all([decodeFrames(clip), decodeFrames(result.bytes)]);
  const W = 200;
  const H = Math.round((before.height / before.width) * W);
  const picks = [0, 7, 14, 21, 28, 35, 42, 49];
  const tile = (f: { width: number; height: number; frames: Uint8Array[] }, i: number) =>
    sharp(f.frames[i], { raw: { width: f.width, height: f.height, channels: 3 } })
      .resize(W, H)
      .png()
      .toBuffer();
  const composites = [];
  for (const [k, i] of picks.entries()) {
    composites.push({ input: await tile(before, i), left: k * W, top: 0 });
    composites.push({ input: await tile(after, i), left: k * W, top: H });
  }
  const strip = await sharp({ create: { width: W * picks.length, height: 2 * H, channels: 3, background: '#111' } })
    .composite(composites)
    .jpeg({ quality: 86 })
    .toBuffer();
  writeFileSync(out, strip);
  console.log(`wrote ${out} (${(strip.length / 1024).toFixed(0)} KB)`);
} finally {
  await jt.close();
}
