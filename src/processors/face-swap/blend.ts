/**
 * Blending the warped face into the target.
 *
 * Poisson ("seamless") cloning keeps the gradients of the new face and takes its boundary values
 * from the target. Written as source + M, the correction M is the membrane: the harmonic function
 * (Laplace's equation, ΔM = 0) inside the mask that equals target - source on the mask boundary.
 * It is smooth, so a coarse-to-fine (cascadic multigrid) solve converges in a few dozen sweeps per
 * level instead of the thousands plain Gauss-Seidel needs at full resolution.
 */
import type { Region } from './geometry.js';
import { medianInPlace } from './select.js';
import type { RgbImage } from './types.js';
import { bytes, floats, ints } from './scratch.js';

/** Cell states of the membrane grid. */
export const NONE = 0; // no data (outside the warped face): not part of the problem
export const INSIDE = 1; // unknown: solved for
export const KNOWN = 2; // Dirichlet boundary value

interface Level {
  w: number;
  h: number;
  state: Uint8Array;
  val: Float32Array; // 3 channels
  /** The INSIDE cells in sweep order, made on the level's first relaxation. */
  order?: { cells: Int32Array; nb: Uint8Array };
}

function coarsen(fine: Level): Level {
  const w = Math.ceil(fine.w / 2);
  const h = Math.ceil(fine.h / 2);
  const state = bytes(w * h);
  const val = floats(w * h * 3);
  for (let cy = 0; cy < h; cy++) {
    for (let cx = 0; cx < w; cx++) {
      let known = 0;
      let inside = false;
      let r = 0;
      let g = 0;
      let b = 0;
      for (let dy = 0; dy < 2; dy++) {
        const y = cy * 2 + dy;
        if (y >= fine.h) continue;
        for (let dx = 0; dx < 2; dx++) {
          const x = cx * 2 + dx;
          if (x >= fine.w) continue;
          const i = y * fine.w + x;
          const s = fine.state[i];
          if (s === KNOWN) {
            known++;
            r += fine.val[i * 3]!;
            g += fine.val[i * 3 + 1]!;
            b += fine.val[i * 3 + 2]!;
          } else if (s === INSIDE) inside = true;
        }
      }
      const c = cy * w + cx;
      // Boundary values win over unknowns, so the coarse problem keeps the boundary conditions.
      if (known > 0) {
        state[c] = KNOWN;
        val[c * 3] = r / known;
        val[c * 3 + 1] = g / known;
        val[c * 3 + 2] = b / known;
      } else if (inside) state[c] = INSIDE;
    }
  }
  return { w, h, state, val };
}

/** Neighbour bits of a cell: which of its 4-neighbours take part (exist and are not NONE). */
const LEFT = 1;
const RIGHT = 2;
const UP = 4;
const DOWN = 8;

/**
 * The INSIDE cells of a level in red-black order (all of one parity, then the other: cells of one
 * colour never neighbour each other, so each half can be swept in any order), with neighbour bits.
 */
function insideCells(level: Level): { cells: Int32Array; nb: Uint8Array } {
  const { w, h, state } = level;
  let count = 0;
  for (let i = 0; i < state.length; i++) if (state[i] === INSIDE) count++;
  const cells = ints(count);
  const nb = bytes(count);
  let k = 0;
  for (let parity = 0; parity < 2; parity++) {
    for (let y = 0; y < h; y++) {
      for (let x = (y + parity) & 1; x < w; x += 2) {
        const i = y * w + x;
        if (state[i] !== INSIDE) continue;
        let m = 0;
        if (x > 0 && state[i - 1] !== NONE) m |= LEFT;
        if (x < w - 1 && state[i + 1] !== NONE) m |= RIGHT;
        if (y > 0 && state[i - w] !== NONE) m |= UP;
        if (y < h - 1 && state[i + w] !== NONE) m |= DOWN;
        cells[k] = i;
        nb[k++] = m;
      }
    }
  }
  return { cells, nb };
}

/** Successive over-relaxation sweeps (red-black order) over the INSIDE cells. */
function relax(level: Level, sweeps: number, omega: number): number {
  const { w, val } = level;
  const { cells, nb } = (level.order ??= insideCells(level));
  let maxChange = 0;
  for (let s = 0; s < sweeps; s++) {
    maxChange = 0;
    for (let k = 0; k < cells.length; k++) {
      const i = cells[k]!;
      const m = nb[k]!;
      let n = 4;
      let r: number;
      let g: number;
      let b: number;
      if (m === (LEFT | RIGHT | UP | DOWN)) {
        // Most cells: all four neighbours.
        const l = (i - 1) * 3;
        const u = (i - w) * 3;
        const d = (i + w) * 3;
        r = val[l]! + val[l + 3 + 3]! + val[u]! + val[d]!;
        g = val[l + 1]! + val[l + 7]! + val[u + 1]! + val[d + 1]!;
        b = val[l + 2]! + val[l + 8]! + val[u + 2]! + val[d + 2]!;
      } else {
        n = 0;
        r = 0;
        g = 0;
        b = 0;
        if (m & LEFT) {
          n++;
          r += val[(i - 1) * 3]!;
          g += val[(i - 1) * 3 + 1]!;
          b += val[(i - 1) * 3 + 2]!;
        }
        if (m & RIGHT) {
          n++;
          r += val[(i + 1) * 3]!;
          g += val[(i + 1) * 3 + 1]!;
          b += val[(i + 1) * 3 + 2]!;
        }
        if (m & UP) {
          n++;
          r += val[(i - w) * 3]!;
          g += val[(i - w) * 3 + 1]!;
          b += val[(i - w) * 3 + 2]!;
        }
        if (m & DOWN) {
          n++;
          r += val[(i + w) * 3]!;
          g += val[(i + w) * 3 + 1]!;
          b += val[(i + w) * 3 + 2]!;
        }
      }
      if (n === 0) continue;
      const o = i * 3;
      const dr = r / n - val[o]!;
      const dg = g / n - val[o + 1]!;
      const db = b / n - val[o + 2]!;
      val[o] = val[o]! + omega * dr;
      val[o + 1] = val[o + 1]! + omega * dg;
      val[o + 2] = val[o + 2]! + omega * db;
      const c = Math.max(Math.abs(dr), Math.abs(dg), Math.abs(db));
      if (c > maxChange) maxChange = c;
    }
  }
  return maxChange;
}

/** Initial guess for the fine INSIDE cells: bilinear interpolation of the coarse solution. */
function prolong(coarse: Level, fine: Level): void {
  const { w: cw, h: ch, state: cs, val: cv } = coarse;
  for (let y = 0; y < fine.h; y++) {
    const v = (y - 0.5) / 2;
    const y0 = Math.max(0, Math.min(ch - 1, Math.floor(v)));
    const y1 = Math.min(ch - 1, y0 + 1);
    const fy = Math.max(0, Math.min(1, v - y0));
    for (let x = 0; x < fine.w; x++) {
      const i = y * fine.w + x;
      if (fine.state[i] !== INSIDE) continue;
      const u = (x - 0.5) / 2;
      const x0 = Math.max(0, Math.min(cw - 1, Math.floor(u)));
      const x1 = Math.min(cw - 1, x0 + 1);
      const fx = Math.max(0, Math.min(1, u - x0));
      // Bilinear over the coarse cells that take part (NONE cells carry no value).
      const c00 = y0 * cw + x0;
      const c01 = y0 * cw + x1;
      const c10 = y1 * cw + x0;
      const c11 = y1 * cw + x1;
      const w00 = cs[c00] === NONE ? 0 : (1 - fx) * (1 - fy);
      const w01 = cs[c01] === NONE ? 0 : fx * (1 - fy);
      const w10 = cs[c10] === NONE ? 0 : (1 - fx) * fy;
      const w11 = cs[c11] === NONE ? 0 : fx * fy;
      const wsum = w00 + w01 + w10 + w11;
      if (wsum <= 0) continue;
      for (let c = 0; c < 3; c++) {
        fine.val[i * 3 + c] =
          (w00 * cv[c00 * 3 + c]! + w01 * cv[c01 * 3 + c]! + w10 * cv[c10 * 3 + c]! + w11 * cv[c11 * 3 + c]!) / wsum;
      }
    }
  }
}

/**
 * Solves ΔM = 0 on the INSIDE cells with M fixed on the KNOWN cells (`val` holds their values; it is
 * updated in place and returned). NONE cells are left out of every stencil.
 *
 * `finest` > 0 stops relaxing that many levels above full resolution and only interpolates below:
 * for a large face the membrane is smooth at the scale of a pixel, and the full-resolution sweeps
 * would dominate the cost of the whole swap.
 */
export function solveMembrane(state: Uint8Array, val: Float32Array, w: number, h: number, finest = 0): Float32Array {
  const levels: Level[] = [{ w, h, state, val }];
  while (Math.max(levels[levels.length - 1]!.w, levels[levels.length - 1]!.h) > 16) {
    levels.push(coarsen(levels[levels.length - 1]!));
  }
  const coarsest = levels[levels.length - 1]!;
  // Start the coarsest unknowns at the mean boundary value, then iterate to convergence (it is tiny).
  let mean = [0, 0, 0];
  let count = 0;
  for (let i = 0; i < coarsest.state.length; i++) {
    if (coarsest.state[i] !== KNOWN) continue;
    count++;
    for (let c = 0; c < 3; c++) mean[c]! += coarsest.val[i * 3 + c]!;
  }
  if (count > 0) mean = mean.map((m) => m / count);
  for (let i = 0; i < coarsest.state.length; i++) {
    if (coarsest.state[i] === INSIDE) for (let c = 0; c < 3; c++) coarsest.val[i * 3 + c] = mean[c]!;
  }
  for (let it = 0; it < 100; it++) if (relax(coarsest, 10, 1.5) < 1e-3) break;
  for (let l = levels.length - 2; l >= 0; l--) {
    prolong(levels[l + 1]!, levels[l]!);
    // The coarse solution is already close; fine levels only remove local (high-frequency) error.
    if (l >= finest) relax(levels[l]!, l === 0 ? 8 : l === 1 ? 12 : 24, 1.6);
  }
  return val;
}

function median(values: Float32Array): number {
  return values.length ? medianInPlace(values.slice()) : 0;
}

/**
 * Least share of the ring that must agree (within the outlier band of its median) for the membrane to
 * be trusted. On the contact sheet 12-62% of the ring disagrees (hair and background over the outline
 * beside a face, in several clusters of their own, e.g. -190 and -140 levels on sample5 face 3 where
 * the agreeing rest is within ±30): at "most of the ring" 11 of its 25 faces fell back to the feathered
 * blend and lost the photo's light along the agreeing part (sample4 face 3: +20 to +30 levels on one
 * cheek), and with it identity (0.474 -> 0.444 upright, the mean of three reads with the landmarks
 * moved ±0.5 px; no other face moved by more than 0.013).
 */
const MIN_AGREEING = 1 / 3;

/**
 * Where the mask edge crosses hair, an earring or background in one image but skin in the other, the
 * boundary difference is far from the rest, and Poisson cloning would smear it across the face. Such
 * ring cells (further from the ring's median than 2.5 robust standard deviations, clamped to 6-20
 * levels, in any channel) are dropped: the membrane there follows the well-matched rest of the ring.
 * Returns false when less than MIN_AGREEING of the ring is left: there is no consensus, and the
 * caller falls back to plain feathering rather than trust it.
 */
function dropOutliers(state: Uint8Array, membrane: Float32Array): boolean {
  const ring: number[] = [];
  for (let i = 0; i < state.length; i++) if (state[i] === KNOWN) ring.push(i);
  if (ring.length < 16) return false;
  const values = new Float32Array(ring.length);
  const dev = new Float32Array(ring.length);
  const bad = new Uint8Array(ring.length);
  for (let c = 0; c < 3; c++) {
    for (let k = 0; k < ring.length; k++) values[k] = membrane[ring[k]! * 3 + c]!;
    const med = median(values);
    for (let k = 0; k < ring.length; k++) dev[k] = Math.abs(values[k]! - med);
    const band = Math.min(20, Math.max(6, 2.5 * 1.4826 * median(dev)));
    for (let k = 0; k < ring.length; k++) if (dev[k]! > band) bad[k] = 1;
  }
  let nbad = 0;
  for (const b of bad) nbad += b;
  if (ring.length - nbad < MIN_AGREEING * ring.length) return false;
  for (let k = 0; k < ring.length; k++) if (bad[k]) state[ring[k]!] = NONE;
  return true;
}

/** The warped face over its render region, as the blend reads it. */
export interface WarpedFace {
  region: Region;
  /** RGB, 3 floats a pixel; the membrane is added to it in place. */
  rgb: Float32Array;
  /** Where the warp covered the region. */
  covered: Uint8Array;
  /** The mask: > 0 where the face is laid in. */
  alpha: Float32Array;
  /** What stays in front of the face (hair, a hand): never a boundary value. */
  occluded?: Uint8Array | undefined;
  /** Face size, px (faceSize): sets the coarsest level worth relaxing. */
  size: number;
}

/**
 * Poisson cloning's correction, added to the face's `rgb` in place: the membrane that takes the
 * face's boundary values from `target` around the mask (alpha > 0).
 */
export function cloneCorrection(target: RgbImage, face: WarpedFace): void {
  const { region, rgb: warped, covered, alpha, occluded } = face;
  const { width: rw, height: rh } = region;
  const state = bytes(rw * rh);
  const membrane = floats(rw * rh * 3);
  for (let i = 0; i < rw * rh; i++) if (alpha[i]! > 0) state[i] = INSIDE;
  // Boundary values only on the ring just outside the mask. Cells further out must stay out of the
  // problem: they hold background or hair, and the coarse levels would average them in.
  for (let y = 0; y < rh; y++) {
    for (let x = 0; x < rw; x++) {
      const i = y * rw + x;
      // An occluder's pixels are not the face's surroundings: no boundary value there (free edge).
      if (state[i] === INSIDE || !covered[i] || occluded?.[i]) continue;
      const ring =
        (x > 0 && state[i - 1] === INSIDE) ||
        (x < rw - 1 && state[i + 1] === INSIDE) ||
        (y > 0 && state[i - rw] === INSIDE) ||
        (y < rh - 1 && state[i + rw] === INSIDE);
      if (!ring) continue;
      state[i] = KNOWN;
      const t = ((region.top + y) * target.width + region.left + x) * 3;
      for (let c = 0; c < 3; c++) membrane[i * 3 + c] = target.data[t + c]! - warped[i * 3 + c]!;
    }
  }
  if (!dropOutliers(state, membrane)) return;
  // Relax only the levels where the face is at most ~100 px across; finer ones only interpolate (the
  // membrane is smooth: at the work size this changes no pixel by more than 1-2 levels).
  const finest = Math.max(0, Math.ceil(Math.log2(face.size / 100)));
  solveMembrane(state, membrane, rw, rh, finest);
  for (let i = 0; i < rw * rh; i++) {
    if (state[i] !== INSIDE) continue;
    for (let c = 0; c < 3; c++) warped[i * 3 + c] = warped[i * 3 + c]! + membrane[i * 3 + c]!;
  }
}

/** out = alpha * face + (1 - alpha) * target inside `region`, in place; pixels where alpha is 0 are not touched. */
export function composite(target: RgbImage, region: Region, face: Float32Array, alpha: Float32Array): void {
  const { width: rw, height: rh } = region;
  // A clamped view rounds and clamps each store itself (half to even, for the rare exact .5).
  const td = new Uint8ClampedArray(target.data.buffer, target.data.byteOffset, target.data.length);
  for (let y = 0; y < rh; y++) {
    let t = ((region.top + y) * target.width + region.left) * 3;
    for (let i = y * rw, end = i + rw; i < end; i++, t += 3) {
      const a = alpha[i]!;
      if (a <= 0) continue;
      const b = 1 - a;
      const f = i * 3;
      td[t] = a * face[f]! + b * td[t]!;
      td[t + 1] = a * face[f + 1]! + b * td[t + 1]!;
      td[t + 2] = a * face[f + 2]! + b * td[t + 2]!;
    }
  }
}
