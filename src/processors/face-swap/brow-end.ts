/**
 * The band over each brow's outer end where the target's temple hair stays in front of the new face
 * (occlusion.ts): a disc around the brow zone's outer end, above the eye line, outside the feature
 * zones except the brow's own outer end. It is found from the zone plane alone (the zones' moments),
 * so a rolled face's brows too, and it never reaches the mouth or the cheeks: kept there as well
 * (round 3's first band ran all around the landmarks), dark hair beside an open-mouthed target's
 * cheeks moved the landmarks found on its result and narrowed its mouth (gap 0.55 of the target's).
 */
import { majorAxisAngle } from './geometry.js';
import { bytes } from './scratch.js';
import { browsAndEyes } from './zone-moments.js';

/**
 * The outer share of a brow's zone (along it) where hair entering from the temple is kept over it.
 * The README example's lock at her right brow's end is all kept at 0.2; 0.3 also kept more of sample5
 * face 1's fringe over her brow (identity 0.42 -> 0.44).
 */
const BROW_END = 0.2;
/** Radius (of the face size) of the disc around a brow zone's outer end where the band lies. */
const BROW_END_REACH = 0.1;

/** The planes the band is found from (of occlusion's OcclusionPlanes). */
export interface BrowEndPlanes {
  width: number;
  height: number;
  /** Each pixel's feature zone (0: none). */
  zoneOf: Uint8Array;
  /** Face size (px). */
  size: number;
}

/** A brow's long axis (unit, pointing to its outer end) through its centroid. */
interface BrowAxis {
  zone: number;
  x: number;
  y: number;
  ux: number;
  uy: number;
}

/**
 * The band (1) over the brows' outer ends: within BROW_END_REACH of each brow zone's outer end, on
 * the brows' side of the line through the eye zones' centres, and either outside every zone or on
 * the brow's own outer BROW_END (along its long axis). Empty when a brow or an eye zone is missing.
 */
export function browEndBand(p: BrowEndPlanes, browZones: readonly number[], eyeZones: readonly number[]): Uint8Array {
  const { width: w, height: h } = p;
  const band = bytes(w * h);
  const found = browsAndEyes(p.zoneOf, w, browZones, eyeZones);
  // Both brows: each has its own outer end.
  if (!found || browZones.length !== 2 || found.brows.length !== 2) return band;
  const { brows, centre: mid, eyes } = found;
  const axes: BrowAxis[] = browZones.map((zone, k) => {
    const b = brows[k]!;
    const angle = majorAxisAngle(b.xx, b.yy, b.xy);
    const sign = Math.sign((b.x - mid.x) * Math.cos(angle) + (b.y - mid.y) * Math.sin(angle)) || 1;
    return { zone, x: b.x, y: b.y, ux: sign * Math.cos(angle), uy: sign * Math.sin(angle) };
  });
  const reach = BROW_END_REACH * p.size;
  for (const a of axes) {
    const { lo, hi } = spanAlong(p, a);
    const end = { x: a.x + hi * a.ux, y: a.y + hi * a.uy };
    const y0 = Math.max(0, Math.floor(end.y - reach));
    const y1 = Math.min(h - 1, Math.ceil(end.y + reach));
    const x0 = Math.max(0, Math.floor(end.x - reach));
    const x1 = Math.min(w - 1, Math.ceil(end.x + reach));
    for (let y = y0; y <= y1; y++) {
      for (let x = x0; x <= x1; x++) {
        const i = y * w + x;
        if (Math.hypot(x - end.x, y - end.y) > reach || (x - eyes.x) * eyes.nx + (y - eyes.y) * eyes.ny <= 0) continue;
        const z = p.zoneOf[i]!;
        const along = (x - a.x) * a.ux + (y - a.y) * a.uy;
        if (!z || (z === a.zone && along >= hi - BROW_END * (hi - lo))) band[i] = 1;
      }
    }
  }
  return band;
}

/** The brow zone's extent along its axis (from its centroid). */
function spanAlong(p: BrowEndPlanes, a: BrowAxis): { lo: number; hi: number } {
  const w = p.width;
  let lo = Infinity;
  let hi = -Infinity;
  for (let i = 0; i < w * p.height; i++) {
    if (p.zoneOf[i] !== a.zone) continue;
    const x = i % w;
    const t = (x - a.x) * a.ux + ((i - x) / w - a.y) * a.uy;
    lo = Math.min(lo, t);
    hi = Math.max(hi, t);
  }
  return { lo, hi };
}
