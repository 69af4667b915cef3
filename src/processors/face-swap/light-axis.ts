/**
 * The source's light axis: the direction in chroma (a*, b*) along which its skin's colour spreads
 * most. A coloured light moves skin along one such line (towards the light's colour, by how much of
 * it a surface catches), so where the source's skin spreads along it much further than the
 * target's does, that spread is the source's light, not its face: the README example's source, lit
 * orange from her right and blue from her left, spreads 25.8 along b* (80° from a*) and 5.8 across;
 * the target 5.3 along the same line. What lies across the axis (a nose redder than the cheeks) is
 * the face's own colour.
 */
import { boundedSpread, transferLocal } from './color.js';
import { majorAxisAngle } from './geometry.js';

/** A unit direction in chroma (a*, b*) and the spread ratio (target / source, bounded) along it. */
export interface LightAxis {
  ux: number;
  uy: number;
  gain: number;
}

/** The weighted covariance (aa, bb, ab) and mean of the chroma (a*, b* of interleaved Lab). */
function chromaMoments(lab: Float32Array, weight: Float32Array) {
  let s = 0;
  let ma = 0;
  let mb = 0;
  for (let i = 0; i < weight.length; i++) {
    const w = weight[i]!;
    if (w <= 0) continue;
    s += w;
    ma += w * lab[i * 3 + 1]!;
    mb += w * lab[i * 3 + 2]!;
  }
  if (s <= 0) return undefined;
  ma /= s;
  mb /= s;
  let aa = 0;
  let bb = 0;
  let ab = 0;
  for (let i = 0; i < weight.length; i++) {
    const w = weight[i]!;
    if (w <= 0) continue;
    const da = lab[i * 3 + 1]! - ma;
    const db = lab[i * 3 + 2]! - mb;
    aa += w * da * da;
    bb += w * db * db;
    ab += w * da * db;
  }
  return { aa: aa / s, bb: bb / s, ab: ab / s };
}

/**
 * The source skin's light axis (the major axis of its chroma's covariance over `weight`) and the
 * target's spread along it over the source's, bounded as a chroma channel's spread is.
 */
export function lightAxis(src: Float32Array, dst: Float32Array, weight: Float32Array): LightAxis {
  const s = chromaMoments(src, weight);
  const t = chromaMoments(dst, weight);
  if (!s || !t) return { ux: 0, uy: 1, gain: 1 };
  const angle = majorAxisAngle(s.aa, s.bb, s.ab);
  const ux = Math.cos(angle);
  const uy = Math.sin(angle);
  const along = (m: { aa: number; bb: number; ab: number }) => ux * ux * m.aa + uy * uy * m.bb + 2 * ux * uy * m.ab;
  const vs = along(s);
  return { ux, uy, gain: vs > 1e-6 ? boundedSpread(1, Math.sqrt(along(t) / vs)) : 1 };
}

/** Chroma (interleaved Lab, in place, where `use` is set) into the axis' frame: along it, then across. */
export function toAxisFrame(lab: Float32Array, use: Uint8Array, axis: LightAxis): void {
  rotate(lab, use, axis.ux, axis.uy);
}

/** The inverse of toAxisFrame. */
export function fromAxisFrame(lab: Float32Array, use: Uint8Array, axis: LightAxis): void {
  rotate(lab, use, axis.ux, -axis.uy);
}

function rotate(lab: Float32Array, use: Uint8Array, c: number, s: number): void {
  for (let i = 0; i < use.length; i++) {
    if (!use[i]) continue;
    const a = lab[i * 3 + 1]!;
    const b = lab[i * 3 + 2]!;
    lab[i * 3 + 1] = c * a + s * b;
    lab[i * 3 + 2] = -s * a + c * b;
  }
}

/** Where transferLocal works: the canvas (`use` set where the warp covered it), `w` × `h`. */
export interface LocalCanvas {
  use: Uint8Array;
  width: number;
  height: number;
}

/**
 * transferLocal's chroma low-pass (the target's local colour minus the source's, over `weight`),
 * at `across` across the source's light axis and, along it, finer as the source's light outweighs
 * the target's there: at `across` × the axis' gain, and no finer than `finest`. A light the target
 * shows a fifth of along that line is the source's alone, down to the scale at which a nose tip or
 * a cheekbone catches it (the README example's blue nose tip, 7 b* below her cheeks at 2×: greyish
 * lilac). Where the target's spread matches the source's (gain 1) both scales are `across`.
 */
export function transferLocalChroma(
  src: Float32Array,
  dst: Float32Array,
  weight: Float32Array,
  c: LocalCanvas,
  axis: LightAxis,
  scales: { across: number; finest: number },
): void {
  const along = Math.max(scales.finest, scales.across * Math.min(1, axis.gain));
  toAxisFrame(src, c.use, axis);
  toAxisFrame(dst, c.use, axis);
  transferLocal(src, dst, weight, c.use, c.width, c.height, [0, along, scales.across]);
  fromAxisFrame(src, c.use, axis);
  fromAxisFrame(dst, c.use, axis);
}
