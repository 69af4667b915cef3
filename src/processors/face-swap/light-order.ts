/**
 * How many terms the lightness surface (recolor.ts) may have: the polynomial degree, up to the
 * highest allowed, that best predicts each ninth of the skin sample from the other eight
 * (cross-validation over a 3 × 3 grid of blocks). A cubic follows a side light's curve where the
 * whole sample shows it; where its data thin out or stop (hair over a temple, the eyes and mouth
 * left out, skin on one side only) it swings with the texture and shading it was fitted to. Held
 * out, such a part shows the swing, and the lower degree that predicts it better is taken. A
 * video's followed face keeps its degree until another wins clearly (heldLight).
 */
import { medianInPlace } from './select.js';
import type { LightChoice } from './color.js';
import { fillBasis, polyBasis, solve, type SurfaceData } from './skin.js';

/** Blocks per side of the sample's bounding box: each ninth of the skin is predicted from the other eight. */
const BLOCKS = 3;
/**
 * The choice reads every SPARSER-th sample of the fit's grid: a few thousand samples hold ten
 * coefficients (all of a 400 px face's, every 2 px, cost 9 ms of CPU; every 4 px, 2).
 */
const SPARSER = 2;
/**
 * How much lower (a fraction of its own) another degree's held-out error, averaged over a followed
 * face's frames, must be for the face to leave the degree it holds. Frame by frame two degrees'
 * errors move by 3-5 % (sd, the README strip's face) to 30 % (a still small face panned by 3 px);
 * near a tie each frame's own choice flipped (8-14 times in 40 frames) and the face's light jumped.
 */
const SWITCH_MARGIN = 0.1;

/** Terms of a polynomial of `degree` in x and y (skin.ts orders them by degree: a lower degree is a prefix). */
const termCount = (degree: number) => ((degree + 1) * (degree + 2)) / 2;

/** The skin samples (every SPARSER × step px, weight > 0): pixel, block, the difference dst − src fitted, weight. */
interface Samples {
  x: Int32Array;
  y: Int32Array;
  block: Uint8Array;
  d: Float64Array;
  wt: Float64Array;
  n: number;
}

function samplesOf(D: SurfaceData): Samples {
  const step = D.step * SPARSER;
  const cap = Math.ceil(D.h / step) * Math.ceil(D.w / step);
  const s = {
    x: new Int32Array(cap),
    y: new Int32Array(cap),
    block: new Uint8Array(cap),
    d: new Float64Array(cap),
    wt: new Float64Array(cap),
    n: 0,
  };
  const box = { x0: D.w, x1: 0, y0: D.h, y1: 0 };
  for (let y = 0; y < D.h; y += step) {
    for (let x = 0; x < D.w; x += step) {
      const i = y * D.w + x;
      if (D.weight[i]! <= 0) continue;
      s.x[s.n] = x;
      s.y[s.n] = y;
      s.d[s.n] = D.dst[i * 3 + D.channel]! - D.src[i * 3 + D.channel]!;
      s.wt[s.n++] = D.weight[i]!;
      box.x0 = Math.min(box.x0, x);
      box.x1 = Math.max(box.x1, x);
      box.y0 = Math.min(box.y0, y);
      box.y1 = Math.max(box.y1, y);
    }
  }
  const cell = (v: number, lo: number, hi: number) =>
    Math.min(BLOCKS - 1, Math.floor(((v - lo) * BLOCKS) / (hi - lo + 1)));
  for (let k = 0; k < s.n; k++) s.block[k] = cell(s.y[k]!, box.y0, box.y1) * BLOCKS + cell(s.x[k]!, box.x0, box.x1);
  return s;
}

/**
 * The held-out error of each degree 1..`max` (index degree − 1) of the surface fitted to D's
 * difference: the median absolute error of the fits without each block on that block's samples.
 * Empty when there is nothing to hold out. Every fit comes from one pass's normal equations per
 * block (the full system less the block's), so this costs two passes over the sample.
 */
export function heldOutErrors(D: SurfaceData, max: number): number[] {
  const S = samplesOf(D);
  if (S.n === 0 || max <= 1) return [];
  const B = polyBasis(D.w, D.h, max);
  const { m } = B;
  const nb = BLOCKS * BLOCKS;
  // Per block, then in all: the weighted normal equations A (m × m, upper half) and b (m).
  const A = new Float64Array((nb + 1) * m * m);
  const b = new Float64Array((nb + 1) * m);
  for (let k = 0; k < S.n; k++) {
    fillBasis(B, S.x[k]!, S.y[k]!);
    const o = S.block[k]! * m;
    for (let r = 0; r < m; r++) {
      const br = B.basis[r]! * S.wt[k]!;
      b[o + r] = b[o + r]! + br * S.d[k]!;
      for (let c = r; c < m; c++) A[(o + r) * m + c] = A[(o + r) * m + c]! + br * B.basis[c]!;
    }
  }
  for (let blk = 0; blk < nb; blk++) {
    for (let r = 0; r < m; r++) {
      b[nb * m + r] = b[nb * m + r]! + b[blk * m + r]!;
      for (let c = r; c < m; c++) A[(nb * m + r) * m + c] = A[(nb * m + r) * m + c]! + A[(blk * m + r) * m + c]!;
    }
  }
  const coef = foldFits(A, b, m, max);
  // The held-out error of each degree, sample by sample, with the fit that did not see its block.
  const err = new Float64Array(max * S.n);
  for (let k = 0; k < S.n; k++) {
    fillBasis(B, S.x[k]!, S.y[k]!);
    for (let deg = 1; deg <= max; deg++) {
      const c = coef[(deg - 1) * nb + S.block[k]!]!;
      let f = 0;
      for (let t = 0; t < c.length; t++) f += c[t]! * B.basis[t]!;
      err[(deg - 1) * S.n + k] = Math.abs(S.d[k]! - f);
    }
  }
  const out: number[] = [];
  for (let deg = 1; deg <= max; deg++) out.push(medianInPlace(err.subarray((deg - 1) * S.n, deg * S.n)));
  return out;
}

/**
 * The degree held-out errors choose: the smallest error (a tie keeps the lower degree); `max`
 * without errors. Given the degree a face `held` so far, that one unless another's error is under
 * its own by more than SWITCH_MARGIN (see heldLight).
 */
export function chosenDegree(errors: readonly number[], max: number, held?: number): number {
  if (errors.length === 0) return max;
  let best = 1;
  for (let deg = 2; deg <= errors.length; deg++) if (errors[deg - 1]! < errors[best - 1]!) best = deg;
  if (held === undefined || held > errors.length) return best;
  return errors[best - 1]! < (1 - SWITCH_MARGIN) * errors[held - 1]! ? best : held;
}

/** The degree (1..`max`) of the surface fitted to D's difference whose held-out error is smallest. */
export function heldOutDegree(D: SurfaceData, max: number): number {
  return chosenDegree(heldOutErrors(D, max), max);
}

/**
 * A followed face's lightness degree from frame to frame (video: the running average of its colour
 * statistics, face-swap.ts blendStats): the held-out errors averaged with weight `k` for the
 * frame's `now`, and the degree held unless another wins clearly on the average (chosenDegree).
 */
export function heldLight(
  old: LightChoice | undefined,
  now: LightChoice | undefined,
  k: number,
): LightChoice | undefined {
  if (!old || !now || old.errors.length !== now.errors.length) return now ?? old;
  const errors = old.errors.map((e, i) => e + k * (now.errors[i]! - e));
  return { errors, degree: chosenDegree(errors, errors.length, old.degree) };
}

/** Per degree 1..max and block: the coefficients fitted without that block (`A`, `b`: per block, then the total). */
function foldFits(A: Float64Array, b: Float64Array, m: number, max: number): Float64Array[] {
  const nb = BLOCKS * BLOCKS;
  const out: Float64Array[] = [];
  for (let deg = 1; deg <= max; deg++) {
    const q = termCount(deg);
    for (let blk = 0; blk < nb; blk++) {
      const Aq = new Float64Array(q * q);
      const bq = new Float64Array(q);
      for (let r = 0; r < q; r++) {
        bq[r] = b[nb * m + r]! - b[blk * m + r]!;
        for (let c = r; c < q; c++) {
          Aq[r * q + c] = A[(nb * m + r) * m + c]! - A[(blk * m + r) * m + c]!;
          Aq[c * q + r] = Aq[r * q + c]!;
        }
      }
      out.push(solve(Aq, bq, q));
    }
  }
  return out;
}
