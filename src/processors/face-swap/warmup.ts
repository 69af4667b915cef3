/**
 * Warm-up for a fresh worker thread: besides loading the models, runs the detectors, the landmark
 * net and the JPEG encoder once on a small synthetic picture, so their kernels (XNNPACK sets a
 * convolution up on its first run) and V8's optimised code exist before the first job: that job's
 * detection then costs ~290 ms of CPU instead of ~475 (bench case "one face ~350 px").
 * warmSwap then swaps synthetic faces, so V8 has compiled the swap's per-pixel loops: cold, the
 * first three swaps of a thread (bench/face-swap-job.ts's target) cost 700, 700 and 350-450 ms of
 * CPU (under half on the thread itself, the rest V8's compiler and GC threads), warm ~90 ms; after
 * warmSwap 430-600, 350-430, then 90-150 ms (a real face still takes paths the synthetic one does
 * not: the skin models and occluder tests run on real texture). warmRealSwap then swaps real faces.
 */
import { readFile } from 'node:fs/promises';
import { detectLandmarks, faceApiDemoPhoto, findFaces, loadFaceModels, locateFacesTiny } from './detect.js';
import { DEFAULT_MAX_PIXELS, faceSwapOptionsSchema } from './options.js';
import { encodeImage } from './image.js';
import { swapLevelled } from './level.js';
import { runFaceSwap } from './pipeline.js';
import type { Point, RgbImage } from './types.js';

/**
 * Detaches a small ArrayBuffer (transfers it), once per thread, before any warm-up. V8 compiles
 * typed-array code on the promise that no buffer of the isolate has ever been detached (its
 * ArrayBuffer detaching protector); the first transfer away (a swap thread moving its frame
 * back, the job sending a frame region) breaks that promise and throws away every optimised
 * function of the thread, which the first job then compiles again: on bench/video.ts, ~700
 * functions recompiled and ~0.7 CPU-s per video second, most of a first job's excess over a
 * second one. Broken here, it is broken before anything is compiled.
 */
export function detachOnce(): void {
  const buffer = new ArrayBuffer(8);
  structuredClone(buffer, { transfer: [buffer] });
}

const SIDE = 384;
/** The synthetic picture's middle, where the landmark net is run once. */
const CENTRE = { x: SIDE / 4, y: SIDE / 4, width: SIDE / 2, height: SIDE / 2 } as const;

/** A grey picture with a skin-coloured oval and a little deterministic texture (no face is found). */
function syntheticPicture(side = SIDE): RgbImage {
  const data = new Uint8Array(side * side * 3);
  const c = side / 2;
  for (let y = 0; y < side; y++) {
    for (let x = 0; x < side; x++) {
      const inside = ((x - c) / (side / 4)) ** 2 + ((y - c) / (side * 0.27)) ** 2 <= 1;
      const n = ((x * 7 + y * 13) % 17) - 8;
      const o = (y * side + x) * 3;
      data[o] = (inside ? 200 : 110) + n;
      data[o + 1] = (inside ? 150 : 115) + n;
      data[o + 2] = (inside ? 125 : 120) + n;
    }
  }
  return { data, width: side, height: side };
}

/**
 * The video models thread's warm-up: the models loaded, then the Tiny detector as key frames use it
 * (its default input size) and the landmark net run once, so the first key frame and the first tracked frames do
 * not pay for XNNPACK's set-up and V8's compilation.
 */
export async function warmTracking(): Promise<void> {
  await loadFaceModels();
  const picture = syntheticPicture();
  await locateFacesTiny(picture, 0.99);
  await detectLandmarks(picture, CENTRE);
}

/** Loads the models, then runs findFaces (both Tiny passes and, finding nothing, SSD), landmarks and a JPEG encode. */
export async function warmUp(): Promise<void> {
  await loadFaceModels();
  const picture = syntheticPicture();
  await findFaces(picture, 0.99);
  await detectLandmarks(picture, CENTRE);
  await encodeImage(picture, 'jpeg', 90);
  await warmSwap();
  await warmRealSwap();
}

/**
 * 68 landmarks of a real face (sample6's second face, slightly turned, mouth open), x and y as
 * thousandths of the landmarks' bounding square.
 */
const TEMPLATE = [
  6, 271, 31, 401, 68, 519, 123, 612, 184, 719, 254, 807, 319, 878, 405, 960, 544, 1000, 678, 946, 768, 856, 835, 775,
  891, 663, 928, 539, 946, 420, 966, 291, 961, 155, 0, 111, 41, 59, 99, 54, 164, 70, 225, 98, 485, 73, 552, 32, 636, 1,
  731, 0, 805, 45, 367, 256, 365, 363, 361, 459, 362, 543, 332, 585, 362, 601, 405, 609, 453, 590, 497, 577, 100, 230,
  128, 206, 195, 206, 264, 243, 210, 268, 140, 264, 535, 225, 593, 173, 664, 167, 722, 193, 672, 231, 598, 234, 300,
  737, 328, 714, 383, 696, 426, 698, 468, 684, 572, 704, 675, 719, 606, 809, 540, 856, 471, 872, 415, 865, 353, 826,
  313, 741, 384, 733, 438, 733, 499, 727, 656, 722, 523, 794, 463, 809, 408, 803,
];

/** TEMPLATE as a face `face` px wide in the middle of a `side` px picture. */
export function templateFace(side: number, face: number): Point[] {
  const o = (side - face) / 2;
  return Array.from({ length: 68 }, (_, i) => ({
    x: o + (TEMPLATE[2 * i]! * face) / 1000,
    y: o + (TEMPLATE[2 * i + 1]! * face) / 1000,
  }));
}

/**
 * Swaps of a synthetic face (a 80 px source into a 110 px face, at the work size and brought back,
 * and into a 60 px one), four times each: every stage of the swap runs and V8 compiles its loops
 * before the first job. Small pictures, so about 1 s of CPU once per thread; larger or fewer
 * swaps warmed less for the same CPU.
 */
export async function warmSwap(): Promise<void> {
  const source = syntheticPicture(120);
  const srcLm = templateFace(120, 80);
  const opts = { blend: 'poisson' as const, colorCorrection: true };
  for (let round = 0; round < 4; round++) {
    for (const [side, face] of [
      [240, 110],
      [160, 60],
    ] as const) {
      await swapLevelled(syntheticPicture(side), templateFace(side, face), source, srcLm, opts);
    }
  }
}

const REAL_SWAP_ROUNDS = 2;

/** One of face-api's demo photos, or undefined if the package has none. */
export function demoPhoto(name: string): Promise<Buffer | undefined> {
  return readFile(faceApiDemoPhoto(name)).catch(() => undefined);
}

/**
 * REAL_SWAP_ROUNDS whole swap jobs on real photos (face-api's demo photos: sample3's largest face
 * into sample6's, 1920 px wide), when the package ships them (~550 ms of CPU each). Real skin and
 * features take paths of the swap (skin models, occluder tests, the work-size resampling) that
 * synthetic faces do not: measured in-process by CPU time after warmUp, the first three swaps of
 * bench/face-swap-job.ts's target cost 381, 286, 121 ms with the synthetic swaps alone, 338, 156,
 * 69 after one real round, 139-163, 139-149, 71-76 after two (warm: 50-90 ms); two rounds without
 * the synthetic swaps left 316, 341, 143.
 */
export async function warmRealSwap(rounds = REAL_SWAP_ROUNDS): Promise<void> {
  const [source, target] = await Promise.all([demoPhoto('sample3.jpg'), demoPhoto('sample6.jpg')]);
  if (!source || !target) return;
  const hooks = { progress: () => {}, checkAborted: () => {} };
  for (let i = 0; i < rounds; i++) {
    const options = faceSwapOptionsSchema.parse({});
    await runFaceSwap({ source, target, options, maxPixels: DEFAULT_MAX_PIXELS }, hooks);
  }
}

/** Where TEMPLATE's face is in face-api's demo photo sample6.jpg: the square its landmarks span (px). */
export const TEMPLATE_IN_SAMPLE6 = { left: 665, top: 403, side: 216 } as const;
