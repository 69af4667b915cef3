/**
 * The swap of one frame's face region, as a video swap thread runs it for every frame (and its
 * warm-up runs it before the first job, so V8 has compiled this very path).
 */
import { swapLevelled } from '../face-swap/level.js';
import type { BlendMode } from '../face-swap/options.js';
import { PREPARED_TUNING, type ColorStats, type SwapTuning } from '../face-swap/swap.js';
import type { Point, RgbImage } from '../face-swap/types.js';

/**
 * The swap's tuning for video frames: the source's own hair is filled once, when the source is
 * prepared (withoutSourceHair), not again on every frame.
 */
export const FRAME_TUNING: Readonly<SwapTuning> = PREPARED_TUNING;

export interface FrameSwap {
  /** The face region of a frame (see swapRegion), swapped in place. */
  frame: RgbImage;
  faces: { landmarks: Point[]; stats?: ColorStats | undefined }[];
  /**
   * The frame's other faces (guard.ts zones, in the region's pixels), which no outline move may
   * reach; undefined when there are none and one face is swapped.
   */
  keepOut?: Point[][] | undefined;
  source: RgbImage;
  srcLandmarks: Point[];
  blend: BlendMode;
  colorCorrection: boolean;
}

/** Swaps each face of `task.frame` in place; returns each face's measured skin statistics. */
export async function swapFrame(task: FrameSwap): Promise<(ColorStats | undefined)[]> {
  const stats: (ColorStats | undefined)[] = [];
  // Each face swapped adds its new outline, so the next one keeps out of it too.
  const keepOut = task.keepOut && [...task.keepOut];
  for (const f of task.faces) {
    stats.push(
      // A rolled face is swapped in its level frame, as in the image job (with the tracked
      // landmarks: no second landmark pass per frame).
      await swapLevelled(
        task.frame,
        f.landmarks,
        task.source,
        task.srcLandmarks,
        {
          blend: task.blend,
          colorCorrection: task.colorCorrection,
          colorStats: f.stats,
          keepOut,
          // Not mirrored: a head turning across the threshold would flip the face between frames.
          mirror: false,
        },
        undefined,
        FRAME_TUNING,
      ),
    );
  }
  return stats;
}
