/**
 * A video swap thread's warm-up on the per-frame path itself (swapFrame, as a job runs it): a real
 * face at a video face's size, its region cut out as the job cuts it, the source prepared as the job
 * prepares it, colour statistics carried from frame to frame, the face panning a little. The image
 * job's warm-up (synthetic faces, a demo photo's face swapped with the image tuning) left the first
 * video job paying for V8's compiler: on bench/video.ts, ~0.8 CPU-s per video second more than the
 * same job run a second time in the same process.
 */
import { decodeImage, resizeRegion } from '../face-swap/image.js';
import { DEFAULT_MAX_PIXELS } from '../face-swap/options.js';
import { withoutSourceHair, type ColorStats } from '../face-swap/swap.js';
import { demoPhoto, TEMPLATE_IN_SAMPLE6, templateFace } from '../face-swap/warmup.js';
import { FRAME_TUNING, swapFrame } from './frame-swap.js';
import { cropFrame, sharedImage, shiftPoints, swapRegion } from './region.js';

/** Frames swapped on each swap thread. */
export const FRAME_ROUNDS = 8;
/**
 * The source as the demo photo has it (216 px square, about a prepared source's size) and the target
 * enlarged twice (a 720p face). A larger source (1.5×) grew the thread's scratch arena past what a
 * job's frames need: +30 MB of RSS after the warm-up, peak RSS of a job over 600 MB.
 */
const SOURCE_SCALE = 1;
const TARGET_SCALE = 2;
/** Landmark jitter per frame (px, over 4 frames), as tracking leaves it: each frame falls between pixels differently. */
const JITTER = 0.7;

/**
 * `rounds` frame swaps of sample6's face into itself enlarged; none when the demo photo is missing.
 * Returns how many of them measured the face's colour (each did, unless the path went wrong).
 */
export async function warmFrameSwaps(rounds = FRAME_ROUNDS): Promise<number> {
  const bytes = await demoPhoto('sample6.jpg');
  if (!bytes) return 0;
  const photo = await decodeImage(bytes, 'warm-up', DEFAULT_MAX_PIXELS);
  const { left, top, side } = TEMPLATE_IN_SAMPLE6;
  const margin = Math.round(side / 2);
  const around = { left: left - margin, top: top - margin, width: side + 2 * margin, height: side + 2 * margin };
  const enlarged = (k: number) =>
    resizeRegion(photo, around, Math.round(k * around.width), Math.round(k * around.height));
  const [src, target] = await Promise.all([enlarged(SOURCE_SCALE), enlarged(TARGET_SCALE)]);
  const srcLandmarks = templateFace(src.width, SOURCE_SCALE * side);
  const source = sharedImage(withoutSourceHair(src, srcLandmarks, FRAME_TUNING));
  const lm = templateFace(target.width, TARGET_SCALE * side);
  let stats: ColorStats | undefined;
  let measured = 0;
  for (let round = 0; round < rounds; round++) {
    const moved = shiftPoints(lm, JITTER * (round % 4), 0.5 * JITTER * (round % 4));
    const r = swapRegion([moved], target.width, target.height);
    const frame = cropFrame(target, r);
    const faces = [{ landmarks: shiftPoints(moved, -r.left, -r.top), stats }];
    const task = { frame, faces, source, srcLandmarks, blend: 'poisson' as const, colorCorrection: true };
    // As a job's task arrives: cloned (its points and statistics are objects of the clone's own
    // shapes, which the swap's code must have seen), the frame transferred, the source shared.
    const out = await swapFrame(structuredClone(task, { transfer: [frame.data.buffer] }));
    if (out[0]) measured++;
    stats = out[0] ?? stats;
  }
  return measured;
}
