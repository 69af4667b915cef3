/**
 * Keep-out zones for the outline move (outline.ts): in a group photo the ring of photo stretched
 * around one face's jaw must not reach a neighbouring face (a cheek against a cheek), nor one
 * swapped before it. A zone is a convex polygon in the picture's pixels: another face's detector
 * box, its landmarks' hull, or the new outline of a face already swapped.
 */
import { convexHull, faceSize } from './geometry.js';
import type { Box, Point } from './types.js';
import { triangulate } from './warp.js';

/** Share of a zone's own size (square root of its area) it is grown by: detector boxes cut cheeks and ears. */
const ZONE_GROW = 0.05;
/** ...plus this many pixels: the warp's bicubic taps and the level frame's bilinear paste-back read around a pixel. */
const ZONE_PAD = 4;
/** Index steps over which the moves beside a held jaw point come back in (1/3, 2/3, whole): no kink. */
const TAPER = 3;

/** A detector box as a zone. */
export function boxZone(b: Box): Point[] {
  return [
    { x: b.x, y: b.y },
    { x: b.x + b.width, y: b.y },
    { x: b.x + b.width, y: b.y + b.height },
    { x: b.x, y: b.y + b.height },
  ];
}

/** Convex `poly` grown by `d` px (each vertex pushed out in 8 directions; the hull of those). */
function grown(poly: readonly Point[], d: number): Point[] {
  const pts: Point[] = [];
  for (const p of poly) {
    for (let k = 0; k < 8; k++)
      pts.push({ x: p.x + d * Math.cos((k * Math.PI) / 4), y: p.y + d * Math.sin((k * Math.PI) / 4) });
  }
  return convexHull(pts);
}

/** Whether convex polygon `p` contains point `q` (either winding). */
function contains(p: readonly Point[], q: Point): boolean {
  let sign = 0;
  for (let i = 0; i < p.length; i++) {
    const a = p[i]!;
    const b = p[(i + 1) % p.length]!;
    const s = Math.sign((b.x - a.x) * (q.y - a.y) - (b.y - a.y) * (q.x - a.x));
    if (s === 0) continue;
    if (sign !== 0 && s !== sign) return false;
    sign = s;
  }
  return true;
}

/** Whether two convex polygons overlap (separating axis test over both polygons' edge normals). */
export function overlaps(a: readonly Point[], b: readonly Point[]): boolean {
  for (const poly of [a, b]) {
    for (let i = 0; i < poly.length; i++) {
      const p = poly[i]!;
      const q = poly[(i + 1) % poly.length]!;
      const nx = q.y - p.y;
      const ny = p.x - q.x;
      const span = (pts: readonly Point[]) => {
        let lo = Infinity;
        let hi = -Infinity;
        for (const r of pts) {
          const v = r.x * nx + r.y * ny;
          lo = Math.min(lo, v);
          hi = Math.max(hi, v);
        }
        return [lo, hi] as const;
      };
      const [a0, a1] = span(a);
      const [b0, b1] = span(b);
      if (a1 < b0 || b1 < a0) return false;
    }
  }
  return true;
}

/**
 * The zones (any points: their hulls) that hold the outline of the face at `lm`: every zone but the
 * face's own (those holding its nose tip), grown by ZONE_GROW of its size plus ZONE_PAD px.
 */
export function othersOf(zones: readonly (readonly Point[])[], lm: readonly Point[]): Point[][] {
  return zones
    .map((z) => convexHull(z))
    .filter((z) => z.length >= 3 && !contains(z, lm[30]!))
    .map((z) => grown(z, ZONE_GROW * faceSize(z) + ZONE_PAD));
}

/** `to`'s jaw moves scaled down beside the held points: 0 at one, 1/TAPER a step away, ... whole TAPER steps away. */
function tapered(from: readonly Point[], to: readonly Point[], held: ReadonlySet<number>): Point[] {
  return to.map((p, i) => {
    if (i >= 17 || held.size === 0) return p;
    let d = Infinity;
    for (const h of held) d = Math.min(d, Math.abs(h - i));
    const k = Math.min(1, d / TAPER);
    const f = from[i]!;
    return k === 1 ? p : { x: f.x + k * (p.x - f.x), y: f.y + k * (p.y - f.y) };
  });
}

/**
 * `to` (the moved landmarks) with the jaw held where the move would reach into a zone: the warp
 * (liquifyOutline) changes the photo inside every triangle of the jaw and its `ring` that has a moved
 * corner, and reads it from the same triangle before the move; no such triangle, in either place, may
 * touch a zone. The jaw corners of one that does are held (not moved), the moves beside them tapered,
 * until none does.
 */
export function guardedJaw(
  from: readonly Point[],
  to: readonly Point[],
  ring: readonly Point[],
  zones: readonly (readonly Point[])[],
): Point[] {
  if (zones.length === 0) return [...to];
  const held = new Set<number>();
  for (;;) {
    const cur = tapered(from, to, held);
    const src = [...from.slice(0, 68), ...ring];
    const dst = [...cur.slice(0, 68), ...ring];
    const moved = (i: number) => src[i]!.x !== dst[i]!.x || src[i]!.y !== dst[i]!.y;
    const tris = triangulate(dst);
    const before = held.size;
    for (let t = 0; t < tris.length; t += 3) {
      const c = [tris[t]!, tris[t + 1]!, tris[t + 2]!];
      if (!c.some(moved)) continue;
      const inSrc = c.map((i) => src[i]!);
      const inDst = c.map((i) => dst[i]!);
      if (!zones.some((z) => overlaps(inSrc, z) || overlaps(inDst, z))) continue;
      for (const i of c) if (i < 17 && moved(i)) held.add(i);
    }
    if (held.size === before) return cur;
  }
}
