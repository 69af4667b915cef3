/**
 * The feature zones' moments (pixel count, centroid, second moments about it), read from a zone
 * plane: where the brows and the eyes' line are (hairline.ts, brow-end.ts), for a rolled face as for
 * an upright one.
 */

/** A zone's pixel count, centroid and second central moments (px², per pixel). */
export interface Moments {
  n: number;
  x: number;
  y: number;
  xx: number;
  yy: number;
  xy: number;
}

/** The moments of each of `zones` in the plane `zoneOf` (`w` wide), in one pass. */
export function zoneMoments(zoneOf: Uint8Array, w: number, zones: readonly number[]): Map<number, Moments> {
  const out = new Map(zones.map((z) => [z, { n: 0, x: 0, y: 0, xx: 0, yy: 0, xy: 0 }]));
  // Indexed by zone: a Map lookup per pixel was most of this pass.
  const byZone: (Moments | undefined)[] = Array.from({ length: 256 }, (_, z) => out.get(z));
  for (let i = 0; i < zoneOf.length; i++) {
    const m = byZone[zoneOf[i]!];
    if (!m) continue;
    const x = i % w;
    const y = (i - x) / w;
    m.n++;
    m.x += x;
    m.y += y;
    m.xx += x * x;
    m.yy += y * y;
    m.xy += x * y;
  }
  for (const m of out.values()) {
    if (!m.n) continue;
    m.x /= m.n;
    m.y /= m.n;
    m.xx = m.xx / m.n - m.x * m.x;
    m.yy = m.yy / m.n - m.y * m.y;
    m.xy = m.xy / m.n - m.x * m.y;
  }
  return out;
}

/** The line through two eye zones' centroids: its midpoint, unit direction (eye 0 to eye 1) and unit normal. */
export interface EyeLine {
  x: number;
  y: number;
  ux: number;
  uy: number;
  /** The normal, pointing towards `towards` when given (the brows: "up" on the face). */
  nx: number;
  ny: number;
}

/** The eye line of two eye zones' moments, its normal turned towards the point `up`; undefined if an eye is missing. */
export function eyeLine(
  e0: Moments | undefined,
  e1: Moments | undefined,
  up: { x: number; y: number },
): EyeLine | undefined {
  if (!e0?.n || !e1?.n) return undefined;
  const len = Math.hypot(e1.x - e0.x, e1.y - e0.y);
  if (len === 0) return undefined;
  const ux = (e1.x - e0.x) / len;
  const uy = (e1.y - e0.y) / len;
  const x = (e0.x + e1.x) / 2;
  const y = (e0.y + e1.y) / 2;
  const sign = (up.x - x) * -uy + (up.y - y) * ux < 0 ? -1 : 1;
  return { x, y, ux, uy, nx: -uy * sign, ny: ux * sign };
}

/** Where a face's brows and eyes are, read from its zone plane (browsAndEyes). */
export interface BrowsAndEyes {
  /** The moments of the brow zones that have pixels, in the order of the zones asked for. */
  brows: Moments[];
  /** The mean of their centroids: "up" on the face. */
  centre: { x: number; y: number };
  /** The line through the two eye zones' centroids, its normal towards `centre`. */
  eyes: EyeLine;
}

/**
 * The brows (those of `browZones` with pixels), their centre and the eye line of the two `eyeZones`
 * in the plane `zoneOf` (`w` wide); undefined when no brow zone has pixels, `eyeZones` are not two,
 * or an eye zone is empty.
 */
export function browsAndEyes(
  zoneOf: Uint8Array,
  w: number,
  browZones: readonly number[],
  eyeZones: readonly number[],
): BrowsAndEyes | undefined {
  if (eyeZones.length !== 2) return undefined;
  const m = zoneMoments(zoneOf, w, [...browZones, ...eyeZones]);
  const brows = browZones.map((z) => m.get(z)!).filter((b) => b.n > 0);
  if (brows.length === 0) return undefined;
  const centre = {
    x: brows.reduce((s, b) => s + b.x, 0) / brows.length,
    y: brows.reduce((s, b) => s + b.y, 0) / brows.length,
  };
  const eyes = eyeLine(m.get(eyeZones[0]!), m.get(eyeZones[1]!), centre);
  return eyes && { brows, centre, eyes };
}
