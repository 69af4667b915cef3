/**
 * Parts of a frame: the tracker's crops, and the face region a swap works on. A swap changes (and
 * reads) only the pixels around its face, so only that region goes to a swap thread and back, not
 * the whole frame (2.7 MB at 720p).
 */
import { extendForehead } from '../face-swap/swap.js';
import { boundingRegion, faceSize, type Region } from '../face-swap/geometry.js';
import type { Point, RgbImage } from '../face-swap/types.js';

/**
 * Room around the landmarks that a swap may read or write, in face sizes: the swap's own region is
 * the landmarks with a forehead lifted by 0.3 face size (tuning `forehead`), plus 2 px, and the
 * ring the outline move stretches (0.3 face size beyond the jaw line, face-swap/outline.ts). This is
 * beyond both; the test "a swap on the face region equals one on the whole frame" checks it.
 */
const FOREHEAD_ROOM = 0.5;
const MARGIN = 0.4;

/** A copy of `region` of an RGB frame, into `into` (r.width * r.height * 3 bytes) when given. */
export function cropFrame(frame: RgbImage, r: Region, into?: Uint8Array): RgbImage {
  const data = into ?? new Uint8Array(r.width * r.height * 3);
  for (let y = 0; y < r.height; y++) {
    const from = ((r.top + y) * frame.width + r.left) * 3;
    data.set(frame.data.subarray(from, from + r.width * 3), y * r.width * 3);
  }
  return { data, width: r.width, height: r.height };
}

/**
 * `img` with its pixels in a SharedArrayBuffer: posted to a thread by reference, not copied. The
 * source face goes with every swap task, and a key frame to the models thread; copies of them were
 * ~5 MB of messages per video second, allocated on one thread and freed on another.
 */
export function sharedImage(img: RgbImage): RgbImage {
  const data = new Uint8Array(new SharedArrayBuffer(img.data.length));
  data.set(img.data);
  return { ...img, data };
}

/** Writes `part` (a crop) back into `frame` at the top-left corner of `r`. */
export function pasteFrame(frame: RgbImage, part: RgbImage, r: Region): void {
  for (let y = 0; y < r.height; y++) {
    frame.data.set(
      part.data.subarray(y * r.width * 3, (y + 1) * r.width * 3),
      ((r.top + y) * frame.width + r.left) * 3,
    );
  }
}

/** The region of a frame that swapping the faces at these landmarks can touch. */
export function swapRegion(faces: readonly (readonly Point[])[], width: number, height: number): Region {
  const pts = faces.flatMap((lm) => {
    const size = faceSize(lm);
    const lifted = extendForehead(lm, FOREHEAD_ROOM);
    const { left, top, width: w, height: h } = boundingRegion(lifted, MARGIN * size, width, height);
    return [
      { x: left, y: top },
      { x: left + w, y: top + h },
    ];
  });
  return boundingRegion(pts, 0, width, height);
}

export const shiftPoints = (pts: readonly Point[], dx: number, dy: number): Point[] =>
  pts.map((p) => ({ x: p.x + dx, y: p.y + dy }));
