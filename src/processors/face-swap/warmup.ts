/**
 * Warm-up for a fresh worker thread: besides loading the models, runs the detectors, the landmark
 * net and the JPEG encoder once on a small synthetic picture, so their kernels (XNNPACK sets a
 * convolution up on its first run) and V8's optimised code exist before the first job: that job's
 * detection then costs ~290 ms of CPU instead of ~475 (bench case "one face ~350 px").
 * Swaps on synthetic pictures (384 and 768 px, two or three of them) did not make the first real
 * swaps faster, so none is run here.
 */
import { detectLandmarks, findFaces, loadFaceModels } from './detect.js';
import { encodeImage } from './image.js';
import type { RgbImage } from './types.js';

const SIDE = 384;

/** A grey picture with a skin-coloured oval and a little deterministic texture (no face is found). */
function syntheticPicture(): RgbImage {
  const data = new Uint8Array(SIDE * SIDE * 3);
  const c = SIDE / 2;
  for (let y = 0; y < SIDE; y++) {
    for (let x = 0; x < SIDE; x++) {
      const inside = ((x - c) / (SIDE / 4)) ** 2 + ((y - c) / (SIDE * 0.27)) ** 2 <= 1;
      const n = ((x * 7 + y * 13) % 17) - 8;
      const o = (y * SIDE + x) * 3;
      data[o] = (inside ? 200 : 110) + n;
      data[o + 1] = (inside ? 150 : 115) + n;
      data[o + 2] = (inside ? 125 : 120) + n;
    }
  }
  return { data, width: SIDE, height: SIDE };
}

/** Loads the models, then runs findFaces (both Tiny passes and, finding nothing, SSD), landmarks and a JPEG encode. */
export async function warmUp(): Promise<void> {
  await loadFaceModels();
  const picture = syntheticPicture();
  await findFaces(picture, 0.99);
  await detectLandmarks(picture, { x: SIDE / 4, y: SIDE / 4, width: SIDE / 2, height: SIDE / 2 });
  await encodeImage(picture, 'jpeg', 90);
}
