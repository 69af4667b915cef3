/**
 * The face detector of the image jobs (findFaces): the fast Tiny Face Detector forward pass agrees
 * with face-api's, the two Tiny passes merge into one list, and SSD runs only when Tiny finds no sure face or a
 * borderline one (which it then confirms or drops).
 */
import { describe, expect, it } from 'vitest';
import {
  FIND_INPUT_SIZES,
  findFaces,
  findLargeFaces,
  largestFaceLandmarks,
  loadFaceModels,
  locateFaces,
  locateFacesTiny,
  mergeDetections,
} from '../../src/processors/face-swap/detect.js';
import { decodeImage, resizeRegion } from '../../src/processors/face-swap/image.js';
import { MAX_FACES } from '../../src/processors/face-swap/options.js';
import type { Box, RgbImage } from '../../src/processors/face-swap/types.js';
import sharp from 'sharp';
import { faceSize } from '../../src/processors/face-swap/geometry.js';
import { portrait, sample } from './fixtures.js';

const decode = (bytes: Buffer) => decodeImage(bytes, 'test', 40_000_000);
const box = (x: number, y: number, side: number): Box => ({ x, y, width: side, height: side });

async function shrunk(img: RgbImage, side: number): Promise<RgbImage> {
  const k = side / Math.max(img.width, img.height);
  const full = { left: 0, top: 0, width: img.width, height: img.height };
  return resizeRegion(img, full, Math.round(img.width * k), Math.round(img.height * k));
}

describe('mergeDetections', () => {
  it('keeps a face seen by both passes once (its best box), and every other face', () => {
    const fine = [
      { box: box(0, 0, 100), score: 0.7, pass: 'fine' },
      { box: box(500, 0, 40), score: 0.6, pass: 'fine' },
    ];
    const coarse = [{ box: box(10, 5, 110), score: 0.9, pass: 'coarse' }];
    expect(mergeDetections([fine, coarse]).map((f) => [f.pass, f.score])).toEqual([
      ['coarse', 0.9],
      ['fine', 0.6],
    ]);
    // A small box inside a large one is the same face too (overlap over the smaller box's area).
    expect(mergeDetections([[{ box: box(0, 0, 200), score: 0.8 }], [{ box: box(50, 50, 60), score: 0.9 }]])).toEqual([
      { box: box(50, 50, 60), score: 0.9 },
    ]);
  });

  it('keeps at most MAX_FACES, the best scores', () => {
    const many = Array.from({ length: MAX_FACES + 5 }, (_, i) => ({ box: box(i * 50, 0, 40), score: i / 100 }));
    const kept = mergeDetections([many]);
    expect(kept).toHaveLength(MAX_FACES);
    expect(Math.min(...kept.map((f) => f.score))).toBe(5 / 100);
  });
});

describe('findFaces', () => {
  it("runs the Tiny Face Detector's forward pass as face-api does (to float rounding)", async () => {
    const { faceapi } = await loadFaceModels();
    await locateFacesTiny({ data: new Uint8Array(32 * 32 * 3), width: 32, height: 32 }, 0.5); // loads the net
    const net = faceapi.nets.tinyFaceDetector;
    const faceApi = Object.getPrototypeOf(net) as typeof net; // face-api's class: its own forward pass
    expect(Object.hasOwn(net, 'forwardInput')).toBe(true);
    const img = await shrunk(await decode(sample(4)), 512);
    const tensor = faceapi.tf.tensor3d(img.data, [img.height, img.width, 3], 'int32');
    const input = await faceapi.toNetInput(tensor);
    const ours = net.forwardInput(input, 512);
    const theirs = faceApi.forwardInput.call(net, input, 512);
    const a = ours.dataSync();
    const b = theirs.dataSync();
    expect(a.length).toBe(b.length);
    let diff = 0;
    for (let i = 0; i < a.length; i++) diff = Math.max(diff, Math.abs(a[i]! - b[i]!));
    expect(diff).toBeLessThan(1e-3);
    for (const t of [tensor, ours, theirs]) t.dispose();
  });

  it('finds on a picture padded to whole cells the faces face-api finds on it padded to a square', async () => {
    const { faceapi } = await loadFaceModels();
    const iou = (a: Box, b: Box) => {
      const w = Math.max(0, Math.min(a.x + a.width, b.x + b.width) - Math.max(a.x, b.x));
      const h = Math.max(0, Math.min(a.y + a.height, b.y + b.height) - Math.max(a.y, b.y));
      return (w * h) / (a.width * a.height + b.width * b.height - w * h);
    };
    let faces = 0;
    for (const n of [1, 2, 3, 4, 5, 6] as const) {
      // The 512 pass of findFaces: the photo shrunk so its longer side is the net's input.
      const img = await shrunk(await decode(sample(n)), 512);
      const ours = await locateFacesTiny(img, 0.3, 512);
      const tensor = faceapi.tf.tensor3d(img.data, [img.height, img.width, 3], 'int32');
      const options = new faceapi.TinyFaceDetectorOptions({ inputSize: 512, scoreThreshold: 0.3 });
      const theirs = await faceapi.nets.tinyFaceDetector.locateFaces(tensor, options);
      tensor.dispose();
      expect(ours, `sample${n}`).toHaveLength(theirs.length);
      for (const t of theirs) {
        const match = ours.find((o) => iou(o.box, t.box) > 0.8);
        expect(match, `sample${n}: face-api's face at ${Math.round(t.box.x)}`).toBeDefined();
        expect(Math.abs(match!.score - t.score)).toBeLessThan(0.05);
      }
      faces += theirs.length;
    }
    expect(faces).toBeGreaterThan(15);
  });

  it('finds the four faces of the group photo with Tiny alone, in boxes like SSD', async () => {
    const img = await decode(sample(4));
    const mine = await findFaces(img, 0.5);
    const ssd = await locateFaces(img, 0.5);
    expect(mine).toHaveLength(4);
    expect(ssd).toHaveLength(4);
    for (const f of mine) {
      // Each box is one of SSD's faces, about the same size and place.
      const s = ssd.find(
        (b) => Math.abs(b.box.x + b.box.width / 2 - (f.box.x + f.box.width / 2)) < 0.25 * b.box.width,
      )!;
      expect(s).toBeDefined();
      expect(f.box.width / s.box.width).toBeGreaterThan(0.8);
      expect(f.box.width / s.box.width).toBeLessThan(1.25);
      expect(Math.abs(f.box.y + f.box.height / 2 - (s.box.y + s.box.height / 2))).toBeLessThan(0.2 * s.box.height);
    }
  });

  it('finds a close-up face Tiny misses at 512 through the coarse pass', async () => {
    const img = await decode(await portrait('darkHair'));
    expect(await locateFacesTiny(await shrunk(img, 512), 0.5, 512)).toHaveLength(0);
    expect(await findFaces(img, 0.5)).toHaveLength(1);
    expect(await findLargeFaces(img, 0.5)).toHaveLength(1);
  });

  it('falls back to SSD only when no Tiny pass finds a face', async () => {
    // A portrait neither Tiny pass finds; SSD does.
    const img = await decode(await portrait('sample6second'));
    let picture = img;
    for (const size of FIND_INPUT_SIZES) {
      picture = await shrunk(picture, Math.min(size, Math.max(picture.width, picture.height)));
      expect(await locateFacesTiny(picture, 0.5, size), `Tiny at ${size}`).toHaveLength(0);
    }
    const ssd = await locateFaces(img, 0.5);
    expect(ssd).toHaveLength(1);
    expect(await findFaces(img, 0.5)).toEqual(ssd);
    expect(await findLargeFaces(img, 0.5)).toEqual(ssd);
  });

  it("finds every face of 100 px or more that SSD finds in face-api's six sample photos, and no other", async () => {
    const centre = (b: Box) => ({ x: b.x + b.width / 2, y: b.y + b.height / 2 });
    const near = (a: Box, b: Box) => Math.hypot(centre(a).x - centre(b).x, centre(a).y - centre(b).y) < 0.3 * b.width;
    let total = 0;
    for (const n of [1, 2, 3, 4, 5, 6] as const) {
      const img = await decode(sample(n));
      const ssd = (await locateFaces(img, 0.5)).filter((f) => f.box.width >= 100);
      const mine = await findFaces(img, 0.5);
      for (const s of ssd)
        expect(
          mine.some((f) => near(f.box, s.box)),
          `sample${n}: SSD's face at ${s.box.x}`,
        ).toBe(true);
      for (const f of mine)
        expect(
          ssd.some((s) => near(f.box, s.box)),
          `sample${n}: a face SSD has not at ${f.box.x}`,
        ).toBe(true);
      total += ssd.length;
    }
    // sample2's profile among them: Tiny scores it 0.32, SSD 0.76.
    expect(total).toBe(22);
  });

  it('tells the largest face by its landmarks when boxes are about the same size', async () => {
    // The bench's picture (sample6 cropped and scaled to 1920x1280): its ~350 px face on the right is
    // clearly the largest by landmarks, but its box is within a few percent of a smaller face's.
    const bytes = await sharp(sample(6))
      .extract({ left: 529, top: 0, width: 1391, height: 927 })
      .resize(1920, 1280)
      .jpeg({ quality: 90 })
      .toBuffer();
    const img = await decode(bytes);
    const faces = await findFaces(img, 0.5);
    const lm = await largestFaceLandmarks(img, faces);
    const cx = lm.reduce((s, p) => s + p.x, 0) / lm.length;
    expect(cx).toBeGreaterThan(1200);
    const ssdLargest = (await locateFaces(img, 0.5))[0]!.box;
    expect(Math.abs(cx - (ssdLargest.x + ssdLargest.width / 2))).toBeLessThan(0.25 * ssdLargest.width);
    expect(faceSize(lm)).toBeGreaterThan(200);
  });
});
