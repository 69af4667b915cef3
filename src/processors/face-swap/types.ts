/** Shared plain-data types of the face-swap pipeline (everything here can cross a thread boundary). */

/** A decoded 8-bit image, 3 interleaved channels (RGB), rows top to bottom. */
export interface RgbImage {
  data: Uint8Array;
  width: number;
  height: number;
}

export interface Point {
  x: number;
  y: number;
}

export interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

/** One face found by detect.ts, in the pixel coordinates of the full (oriented) image. */
export interface DetectedFace {
  box: Box;
  /** Detector confidence, 0..1. */
  score: number;
  /** The 68 iBUG landmarks: jaw 0-16, brows 17-26, nose 27-35, eyes 36-47, mouth 48-67. */
  landmarks: Point[];
  /** 128-d face-api descriptor; only computed when asked for (it costs ~50 ms per face). */
  descriptor?: Float32Array;
}
