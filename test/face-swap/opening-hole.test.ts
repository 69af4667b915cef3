/**
 * The target's open mouth stays the target's where its landmarks draw the inner lips across the
 * opening (opening.ts's mouthHole): sample4 face 3, a wide smile rolled in the photo, whose inner
 * upper lip the net draws across her upper teeth and whose outer one lies on their top edge. The
 * source's red lip was warped over those teeth. Through the job type; generous timeouts, no timing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectLandmarks, loadFaceModels, refineLandmarks } from '../../src/processors/face-swap/detect.js';
import { createFaceSwapJobType, type FaceSwapJobType } from '../../src/processors/face-swap/index.js';
import { levelled } from '../../src/processors/face-swap/level.js';
import { rasterizePolygon } from '../../src/processors/face-swap/mask.js';
import { openingMask } from '../../src/processors/face-swap/opening.js';
import { DEFAULT_TUNING, extendForehead } from '../../src/processors/face-swap/swap.js';
import type { RgbImage } from '../../src/processors/face-swap/types.js';
import { runContext } from './fixtures.js';
import { decodeSheetImage, type SheetFace, sheetFaces, sheetSourceFace } from './sheet.js';

const LONG = 600_000;

describe('the opening the landmarks draw the lips across', { timeout: LONG }, () => {
  let jt: FaceSwapJobType;
  let face: SheetFace;
  let source: Buffer;

  beforeAll(async () => {
    jt = createFaceSwapJobType();
    await Promise.all([jt.warmup(), loadFaceModels()]);
    source = (await sheetSourceFace()).bytes;
    for await (const f of sheetFaces((n) => n === 'sample4')) if (f.name === 'sample4 face 3') face = f;
  }, LONG);

  afterAll(async () => {
    await jt?.close();
  });

  it("keeps sample4 face 3's teeth outside its landmarks' inner lip line", async () => {
    const lm = await refineLandmarks(face.image, await detectLandmarks(face.image, face.face.box));
    const reach = extendForehead(lm, DEFAULT_TUNING.forehead);
    // Its level frame, where the swap works, and the same frame cut from the result.
    const t = await levelled(face.image, lm, reach, refineLandmarks);
    const run = runContext(
      { source, target: face.target.bytes },
      { format: 'png', target_face_indices: [face.index], min_confidence: face.target.confidence },
    );
    const after = (await levelled(await decodeSheetImage((await jt.run(run.ctx)).bytes), lm, reach)).image;
    // The opening the pixels show (teeth and the throat's dark) outside the landmarks' inner lip
    // line, above its corners' chord (60-64): the upper teeth under the landmarks' upper lip.
    const { region, mask } = openingMask(t.image, t.lm);
    const inner = rasterizePolygon(t.lm.slice(60, 68), region);
    const [a, b] = [t.lm[60]!, t.lm[64]!];
    const above = (x: number, y: number) => (b.x - a.x) * (y - a.y) - (b.y - a.y) * (x - a.x) < 0;
    const diff = (a: RgbImage, b: RgbImage) => {
      let sum = 0;
      let n = 0;
      for (let y = 0; y < region.height; y++) {
        for (let x = 0; x < region.width; x++) {
          const j = y * region.width + x;
          if (mask[j]! < 3 || inner[j] || !above(region.left + x + 0.5, region.top + y + 0.5)) continue;
          const i = ((region.top + y) * a.width + region.left + x) * 3;
          for (let c = 0; c < 3; c++) sum += Math.abs(a.data[i + c]! - b.data[i + c]!);
          n++;
        }
      }
      return { n, mean: sum / (3 * n) };
    };
    const d = diff(t.image, after);
    expect(d.n).toBeGreaterThan(20);
    // A mean difference of 20 levels when the source's lip was drawn there; 0.2 now.
    expect(d.mean).toBeLessThan(4);
  });
});
