/**
 * The source's hair fill (docs/face-swap.md step 8) never erases the source's eyes: sample6's face 1,
 * whose hair falls over her far cheek, took her lashes and dark eye for hair, and the swap into
 * sample1's face 0 came out with skin where an eye should be.
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FaceDetectJobType } from '../../src/processors/face-swap/detect-job.js';
import type { FaceSwapJobType } from '../../src/processors/face-swap/index.js';
import { inPolygon } from '../../src/processors/face-swap/geometry.js';
import { media, runContext, sample, faceJobTypes } from './fixtures.js';

const LONG = 240_000;

/** Each eye's darkest 10 % (grey) inside its opening (landmarks 36-41, 42-47), and the skin's median below it. */
async function eyeDarkness(jpeg: Buffer, lm: readonly (readonly number[])[]) {
  const { data, info } = await sharp(jpeg).greyscale().raw().toBuffer({ resolveWithObject: true });
  const at = (x: number, y: number) => data[Math.round(y) * info.width + Math.round(x)]!;
  return [36, 42].map((from) => {
    const pts = lm.slice(from, from + 6);
    const poly = pts.map(([x, y]) => ({ x: x!, y: y! }));
    const xs = pts.map((p) => p[0]!);
    const ys = pts.map((p) => p[1]!);
    const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
    const inside: number[] = [];
    for (let y = Math.floor(y0); y <= y1; y++) {
      for (let x = Math.floor(x0); x <= x1; x++) if (inPolygon(x + 0.5, y + 0.5, poly)) inside.push(at(x, y));
    }
    inside.sort((a, b) => a - b);
    const dark = inside.slice(0, Math.max(1, Math.round(inside.length / 10)));
    // The cheek under the eye: a band one eye-height below its lower lid.
    const h = y1 - y0;
    const skin: number[] = [];
    for (let y = Math.round(y1 + h); y <= y1 + 2 * h; y++)
      for (let x = Math.round(x0); x <= x1; x++) skin.push(at(x, y));
    skin.sort((a, b) => a - b);
    return { dark: dark.reduce((s, v) => s + v, 0) / dark.length, skin: skin[skin.length >> 1]! };
  });
}

describe('the source hair fill keeps the source’s eyes', { timeout: LONG }, () => {
  let jt: FaceSwapJobType;
  let fd: FaceDetectJobType;
  let close: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    ({ jt, fd, close } = await faceJobTypes());
  }, LONG);

  afterAll(async () => {
    await close?.();
  });

  it('sample6 face 1 into sample1 face 0 keeps a dark iris in both eyes', async () => {
    const found = await fd.run({
      model: 'ssd-landmarks68-v1',
      options: fd.options.parse({}),
      media: { target: media(sample(1)) },
      signal: new AbortController().signal,
      progress: () => {},
    });
    const faces = (JSON.parse(found.bytes.toString('utf8')) as { faces: { landmarks: number[][] }[] }).faces;
    const run = runContext(
      { source: sample(6), target: sample(1) },
      { source_face_index: 1, target_face_indices: [0] },
    );
    const result = await jt.run(run.ctx);
    const eyes = await eyeDarkness(result.bytes, faces[0]!.landmarks);
    // Kept, an eye's darkest tenth (its iris, pupil and lash line) is under a twentieth of the cheek's
    // grey (1-5 against 93-135); filled with skin, the right eye's was 39 against 135 (a glint's rim).
    for (const eye of eyes) expect(eye.dark).toBeLessThan(0.15 * eye.skin);
  });
});
