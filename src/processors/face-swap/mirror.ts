/**
 * The source face mirrored left to right. A face turned one way, put onto a face turned the other,
 * stretches its far cheek across the target's near one (smeared texture, the target's eye make-up
 * showing); mirrored, the source's visible side is the one the target shows. Faces are nearly
 * symmetric, and face recognition reads a mirrored face as the same person.
 */
import { boundingRegion, faceSize, noseAcross } from './geometry.js';
import type { Point, RgbImage } from './types.js';

/** Each 68-point landmark's mirror partner (iBUG layout: jaw, brows, nose, eyes, lips). */
const PARTNER: readonly number[] = (() => {
  const p = Array.from({ length: 68 }, (_, i) => i);
  const pair = (a: number, b: number) => {
    p[a] = b;
    p[b] = a;
  };
  for (let i = 0; i < 8; i++) pair(i, 16 - i);
  for (let i = 0; i < 5; i++) pair(17 + i, 26 - i);
  pair(31, 35);
  pair(32, 34);
  [
    [36, 45],
    [37, 44],
    [38, 43],
    [39, 42],
    [40, 47],
    [41, 46],
    [48, 54],
    [49, 53],
    [50, 52],
    [55, 59],
    [56, 58],
    [60, 64],
    [61, 63],
    [65, 67],
  ].forEach(([a, b]) => pair(a!, b!));
  return p;
})();

/**
 * Whether to mirror the source for this target: the two are turned opposite ways (noseAcross: 0.5
 * frontal, towards 0 or 1 as the head turns) and the target at least `minTurn` from frontal. A
 * mirrored source also mirrors its shading (the nose's side light), which the landmark net reads
 * as pose: on near-frontal targets that moved the result's landmarks more than it gave identity.
 */
export function prefersMirror(srcLm: readonly Point[], targetLm: readonly Point[], minTurn: number): boolean {
  const s = noseAcross(srcLm) - 0.5;
  const t = noseAcross(targetLm) - 0.5;
  return s * t < 0 && Math.abs(t) >= minTurn;
}

/** Room around the source's landmarks (of its face size) copied along: the forehead and the warp's margin. */
const MARGIN = 0.5;

/** The source's surroundings mirrored (a copy of that region only) and its landmarks, renumbered, there. */
export function mirrorFace(img: RgbImage, lm: readonly Point[]): { image: RgbImage; lm: Point[] } {
  const r = boundingRegion(lm, MARGIN * faceSize(lm), img.width, img.height);
  const { width: w, height: h } = r;
  const data = new Uint8Array(w * h * 3);
  for (let y = 0; y < h; y++) {
    const row = ((r.top + y) * img.width + r.left) * 3;
    for (let x = 0; x < w; x++) {
      const from = row + (w - 1 - x) * 3;
      const to = (y * w + x) * 3;
      data[to] = img.data[from]!;
      data[to + 1] = img.data[from + 1]!;
      data[to + 2] = img.data[from + 2]!;
    }
  }
  // Pixel i covers [i, i + 1): x mirrors to w - x. Each point takes its partner's place.
  const moved = lm.map((p) => ({ x: w - (p.x - r.left), y: p.y - r.top }));
  return { image: { width: w, height: h, data }, lm: PARTNER.map((j) => moved[j]!) };
}

/** Landmarks of the face mirrored left to right (x negated, renumbered): its shape, for reading in the face's own frame. */
export function mirrorLandmarks(lm: readonly Point[]): Point[] {
  return PARTNER.map((j) => ({ x: -lm[j]!.x, y: lm[j]!.y }));
}
