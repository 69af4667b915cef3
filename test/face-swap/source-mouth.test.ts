/**
 * A source smiling with its teeth shown, swapped onto a closed target mouth, leaves no teeth there
 * (source-mouth.ts): the README example's pair (sample3's middle woman into sample6's right-hand
 * woman, whose source's landmarks draw the lips closed along the teeth's top edge) and sample3's
 * dark-haired woman (an open smile the landmarks draw open) into sample3's curly blonde (closed
 * lips). Measured inside the target's outer lip line: the share of teeth-like pixels (at least as
 * light as the skin around the mouth, at most 0.6 of its saturation). Through the job type;
 * generous timeouts, no timing assertions.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rgbToLab } from '../../src/processors/face-swap/color.js';
import { detectFaces, loadFaceModels } from '../../src/processors/face-swap/detect.js';
import { faceSize } from '../../src/processors/face-swap/geometry.js';
import { decodeImage } from '../../src/processors/face-swap/image.js';
import { createFaceSwapJobType, type FaceSwapJobType } from '../../src/processors/face-swap/index.js';
import { rasterizePolygon } from '../../src/processors/face-swap/mask.js';
import { mouthGap, OPEN_GAP } from '../../src/processors/face-swap/mouth.js';
import { sourceOpening } from '../../src/processors/face-swap/source-mouth.js';
import type { Point, RgbImage } from '../../src/processors/face-swap/types.js';
import { exampleFaces, portrait, runContext, sheetSource } from './fixtures.js';

const LONG = 240_000;
const decode = (bytes: Buffer | Uint8Array) => decodeImage(bytes, 'test', 1e9);

async function landmarks(img: RgbImage): Promise<Point[]> {
  const faces = await detectFaces(img);
  expect(faces.length).toBeGreaterThan(0);
  return faces[0]!.landmarks;
}

/** L* and C* of the pixels inside `lm`'s outer lip line. */
function lipPixels(img: RgbImage, lm: readonly Point[]): { L: number; C: number }[] {
  const lips = rasterizePolygon(lm.slice(48, 60), { left: 0, top: 0, width: img.width, height: img.height });
  const lab = rgbToLab(Float32Array.from(img.data));
  const out: { L: number; C: number }[] = [];
  for (let i = 0; i < lips.length; i++) {
    if (lips[i]) out.push({ L: lab[i * 3]!, C: Math.hypot(lab[i * 3 + 1]!, lab[i * 3 + 2]!) });
  }
  expect(out.length).toBeGreaterThan(200);
  return out;
}

/**
 * Share of the pixels inside the target's outer lip line that look like teeth: 20 L* lighter than
 * the target's lips (their median) and of saturation (C* / L*) 0.3 at most. The README example's
 * result on main: its source's teeth at L* 81-88, C* 19-22, over the target's lips at L* 52.
 */
function teethShare(img: RgbImage, lm: readonly Point[], lipL: number): number {
  const px = lipPixels(img, lm);
  return px.filter((p) => p.L >= lipL + 20 && p.C <= 0.3 * p.L).length / px.length;
}

describe('a smiling source onto a closed mouth', { timeout: LONG }, () => {
  let jt: FaceSwapJobType;

  beforeAll(async () => {
    jt = createFaceSwapJobType();
    await Promise.all([jt.warmup(), loadFaceModels()]);
  }, LONG);

  afterAll(async () => {
    await jt?.close();
  });

  async function teethAfter(source: Buffer, target: Buffer) {
    const before = await decode(target);
    const lm = await landmarks(before);
    expect(mouthGap(lm, faceSize(lm))).toBeLessThan(OPEN_GAP);
    const result = await jt.run(runContext({ source, target }, { format: 'png' }).ctx);
    const own = lipPixels(before, lm).map((p) => p.L);
    const lipL = own.sort((a, b) => a - b)[own.length >> 1]!;
    const r = { before: teethShare(before, lm, lipL), after: teethShare(await decode(result.bytes), lm, lipL) };
    return r;
  }

  it("leaves none of the README example's source's teeth on the target's closed lips", async () => {
    const { source, target } = await exampleFaces();
    const r = await teethAfter(source, target);
    // The target's own: its lips' glossy highlight (0.023). main: 0.149, the source's teeth. Now
    // 0.066: the highlight, shifted with the target's lips to the new lips' lightness.
    expect(r.before).toBeLessThan(0.03);
    expect(r.after).toBeLessThan(r.before + 0.06);
  });

  it("leaves none of an open smile's teeth on sample3's curly blonde's closed lips", async () => {
    const r = await teethAfter(await portrait('darkHair'), await portrait('curlyBlonde'));
    // main: 0.026 (the source's teeth along the lip line); now 0.
    expect(r.before).toBeLessThan(0.005);
    expect(r.after).toBeLessThan(0.01);
  });

  it('finds the opening of smiling sources, and none on closed ones', async () => {
    const open = async (bytes: Buffer) => {
      const img = await decode(bytes);
      return sourceOpening(img, await landmarks(img)) !== undefined;
    };
    expect(await open((await exampleFaces()).source)).toBe(true);
    expect(await open(await portrait('darkHair'))).toBe(true);
    // sample4's third woman: her teeth in warm light as saturated as 0.8 of her skin's, read only
    // by opening.ts's reading of a target's opening (undefined before).
    expect(await open(await portrait('sample4third'))).toBe(true);
    // The contact sheet's source and the expression test's: closed lips.
    expect(await open(await sheetSource())).toBe(false);
    expect(await open(await portrait('curlyBlonde'))).toBe(false);
  });
});
