/**
 * The eye whites' chroma after the colour step (recolor.ts): one albedo, near-neutral, lit as the
 * target's own whites are. The light the colour step takes off an eye is the skin's around it, and
 * a side light is often sharper on the lids and brow than on the white set back under them: the
 * README example's source is lit blue on her left lid, hardly on that eye's white, and with the
 * skin's blue taken off (the target's warm light put on) that white came out amber. The whites are
 * the better probe of a light at the eyes: the source's two whites meet at their mean (where its
 * two side lights cancel: the source's own relation of eye white to skin), and then differ as the
 * target's two whites do (a target lit orange on one side and blue on the other keeps that).
 */
import type { Region } from './geometry.js';
import { featherMask, rasterizePolygon } from './mask.js';
import { medianOf } from './select.js';
import type { Point } from './types.js';

/** The eye contours (landmarks 36-41 and 42-47). */
const EYES = [36, 42] as const;
/** Fewer white pixels than this in an eye (fraction of its contour): too little to read its colour. */
const MIN_WHITE = 0.05;
/** Feather (px) of the shift at the contour: the lash line is soft at 100 %. */
const EDGE = 1;

/** A face's planes: L* at [i * 3] of `light`, chroma relative to L* + 16 at [i * 3 + 1, 2] of `chroma`. */
export interface EyePlanes {
  light: Float32Array;
  chroma: Float32Array;
  lm: readonly Point[];
}

/**
 * The white of the eye at landmark `k`: the pixels inside its contour at least its median L* and
 * at most its median chroma (the iris, pupil and lash line are darker, a lid caught by the contour
 * more chromatic); none when too few.
 */
function whiteOf(f: EyePlanes, k: number, region: Region): number[] {
  const mask = rasterizePolygon(f.lm.slice(k, k + 6), region);
  const cells: number[] = [];
  for (let i = 0; i < mask.length; i++) if (mask[i]) cells.push(i);
  const C = (i: number) => Math.hypot(f.chroma[i * 3 + 1]!, f.chroma[i * 3 + 2]!);
  const minL = medianOf(cells.map((i) => f.light[i * 3]!));
  const maxC = medianOf(cells.map(C));
  const white = cells.filter((i) => f.light[i * 3]! >= minL && C(i) <= maxC);
  return white.length >= Math.max(1, MIN_WHITE * cells.length) ? white : [];
}

/** Mean chroma (a*, b* of interleaved Lab) over `cells`. */
function meanChroma(lab: Float32Array, cells: readonly number[]): [number, number] {
  const sum = (c: number) => cells.reduce((s, i) => s + lab[i * 3 + c]!, 0) / cells.length;
  return [sum(1), sum(2)];
}

/** The `n`-weighted mean of two pairs. */
const weighted = (v: readonly [number, number][], n: readonly number[]) =>
  [0, 1].map((c) => (n[0]! * v[0]![c]! + n[1]! * v[1]![c]!) / (n[0]! + n[1]!));

/**
 * The source's eye whites (`lab`, chroma relative to L* + 16 as the colour step leaves it, in
 * place; `src` read before the step) to the target's (`dst`): each eye's contour shifted so that
 * its white's mean is the source's whites' mean (after the step, pixel-weighted) plus the target's
 * white's departure from the target's mean. Nothing changes unless the source shows both whites;
 * with either of the target's unread (closed), both source whites end at their mean.
 */
export function evenEyeWhites(lab: Float32Array, src: EyePlanes, dst: EyePlanes, region: Region): void {
  const whites = EYES.map((k) => whiteOf(src, k, region));
  if (whites.some((w) => w.length === 0)) return;
  const n = whites.map((w) => w.length);
  const now = whites.map((w) => meanChroma(lab, w));
  const common = weighted(now, n);
  const theirs = EYES.map((k) => whiteOf(dst, k, region));
  const lit = theirs.every((w) => w.length > 0);
  const their = theirs.map((w) => (lit ? meanChroma(dst.chroma, w) : ([0, 0] as [number, number])));
  const theirMean = weighted(their, n);
  for (const [j, k] of EYES.entries()) {
    const shift = [0, 1].map((c) => common[c]! + their[j]![c]! - theirMean[c]! - now[j]![c]!);
    const inside = featherMask(rasterizePolygon(src.lm.slice(k, k + 6), region), region.width, region.height, EDGE);
    for (let i = 0; i < inside.length; i++) {
      const t = inside[i]!;
      if (t <= 0) continue;
      lab[i * 3 + 1] = lab[i * 3 + 1]! + t * shift[0]!;
      lab[i * 3 + 2] = lab[i * 3 + 2]! + t * shift[1]!;
    }
  }
}
