/** Small plane-geometry helpers for landmark sets and boxes. */
import type { Box, Point } from './types.js';

/** Convex hull, counter-clockwise (Andrew's monotone chain). */
export function convexHull(points: readonly Point[]): Point[] {
  const pts = [...points].sort((a, b) => a.x - b.x || a.y - b.y);
  if (pts.length < 3) return pts;
  const cross = (o: Point, a: Point, b: Point) => (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x);
  const lower: Point[] = [];
  for (const p of pts) {
    while (lower.length >= 2 && cross(lower[lower.length - 2]!, lower[lower.length - 1]!, p) <= 0) lower.pop();
    lower.push(p);
  }
  const upper: Point[] = [];
  for (let i = pts.length - 1; i >= 0; i--) {
    const p = pts[i]!;
    while (upper.length >= 2 && cross(upper[upper.length - 2]!, upper[upper.length - 1]!, p) <= 0) upper.pop();
    upper.push(p);
  }
  lower.pop();
  upper.pop();
  return lower.concat(upper);
}

export function polygonArea(poly: readonly Point[]): number {
  let a = 0;
  for (let i = 0; i < poly.length; i++) {
    const p = poly[i]!;
    const q = poly[(i + 1) % poly.length]!;
    a += p.x * q.y - q.x * p.y;
  }
  return Math.abs(a) / 2;
}

export interface Region {
  left: number;
  top: number;
  width: number;
  height: number;
}

/** The extremes of `points`. */
export function extents(points: readonly Point[]): { x0: number; y0: number; x1: number; y1: number } {
  let x0 = Infinity;
  let y0 = Infinity;
  let x1 = -Infinity;
  let y1 = -Infinity;
  for (const p of points) {
    x0 = Math.min(x0, p.x);
    y0 = Math.min(y0, p.y);
    x1 = Math.max(x1, p.x);
    y1 = Math.max(y1, p.y);
  }
  return { x0, y0, x1, y1 };
}

/** Integer bounding box of `points`, grown by `margin` and clipped to a width x height image. */
export function boundingRegion(points: readonly Point[], margin: number, width: number, height: number): Region {
  const { x0, y0, x1, y1 } = extents(points);
  const left = Math.max(0, Math.floor(x0 - margin));
  const top = Math.max(0, Math.floor(y0 - margin));
  const right = Math.min(width, Math.ceil(x1 + margin));
  const bottom = Math.min(height, Math.ceil(y1 + margin));
  return { left, top, width: Math.max(0, right - left), height: Math.max(0, bottom - top) };
}

/** Face scale: square root of the area of the landmarks' hull (robust to yaw, unlike eye distance). */
export function faceSize(landmarks: readonly Point[]): number {
  return Math.sqrt(polygonArea(convexHull(landmarks)));
}

/**
 * Where the nose tip (landmark 30) sits between the ends of the jaw line (0 and 16), measured
 * along the eye line: 0.5 for a frontal face, towards 0 or 1 as the head turns. On the 22 faces of
 * face-api's six sample photos 0.22-0.81, and 0.05 on sample2's full profile (whose landmarks
 * otherwise look like a three-quarter face's; swapped, it came out smeared with a second eye).
 */
export function noseAcross(lm: readonly Point[]): number {
  const ex = lm[45]!.x + lm[42]!.x - lm[39]!.x - lm[36]!.x;
  const ey = lm[45]!.y + lm[42]!.y - lm[39]!.y - lm[36]!.y;
  const along = (p: Point) => p.x * ex + p.y * ey;
  const a = along(lm[0]!);
  return (along(lm[30]!) - a) / (along(lm[16]!) - a);
}

/** The area two boxes share (0 when apart). */
export function overlapArea(a: Box, b: Box): number {
  const w = Math.max(0, Math.min(a.x + a.width, b.x + b.width) - Math.max(a.x, b.x));
  const h = Math.max(0, Math.min(a.y + a.height, b.y + b.height) - Math.max(a.y, b.y));
  return w * h;
}

/** Intersection over union of two boxes (face-api's iou()). */
export function iou(a: Box, b: Box): number {
  const inter = overlapArea(a, b);
  return inter / (a.width * a.height + b.width * b.height - inter);
}

/** Whether (x, y) lies inside the polygon `poly` (even-odd rule). */
export function inPolygon(x: number, y: number, poly: readonly Point[]): boolean {
  let inside = false;
  for (let i = 0, j = poly.length - 1; i < poly.length; j = i++) {
    const a = poly[i]!;
    const b = poly[j]!;
    if (a.y > y !== b.y > y && x < ((b.x - a.x) * (y - a.y)) / (b.y - a.y) + a.x) inside = !inside;
  }
  return inside;
}

/** The angle (radians) of the major axis of a 2-d spread with second moments xx, yy and xy. */
export function majorAxisAngle(xx: number, yy: number, xy: number): number {
  return 0.5 * Math.atan2(2 * xy, xx - yy);
}
