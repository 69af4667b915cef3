/**
 * The mouth's opening read from the pixels. On blurry or turned faces the 68-point net draws the
 * inner lip line (60-67) closed or barely open over a smile that shows its teeth; the hole the
 * swap cuts for the target's teeth (mouth.ts) followed it, and the source's closed lips were painted
 * over the teeth. Here the opening is found within the outer lip line (48-59): teeth (lighter than
 * the skin around the mouth, and less saturated) and the throat's dark, in a band along the mouth.
 */
import { regionLab } from './color.js';
import { boundingRegion, faceSize, type Region } from './geometry.js';
import { flood8, rasterizePolygon } from './mask.js';
import { innerMouthHole, mouthGap, OPEN_GAP } from './mouth.js';
import { medianOf } from './select.js';
import type { Point, RgbImage } from './types.js';

/** Upper and lower inner-lip points facing each other across the opening (as mouth.ts's). */
const PAIRS = [
  [61, 67],
  [62, 66],
  [63, 65],
] as const;

export const OPENING = {
  /**
   * A tooth's saturation (C* / L*) is at most this share of the skin's around the mouth (their
   * medians), and its lightness at least `teethLight` of the skin's: [sure, possible] (hysteresis:
   * a blurred tooth's edge is only possibly one, joined to a sure one).
   */
  teethSaturation: [0.7, 0.85],
  teethLight: [1, 0.9],
  /**
   * Teeth are not red: below the lower inner lip line a tooth's a* is at most this share of the
   * skin's (its median around the mouth). A pale lower lip passes the lightness and saturation
   * tests but is as red as the skin or more (sample5 face 3: 1.05 of it, face 0: 1.56); the lower
   * teeth the landmarks draw inside the lower lip band are not (sample3's smile: 0.27).
   */
  teethRed: 0.6,
  /** The throat's dark: at most this share of the skin's lightness [sure, possible]. */
  dark: [0.45, 0.55],
  /** An opening spans at least this share of the mouth's width (corner to corner): a lip's highlight does not. */
  minWidth: 0.35,
  /** The same for an opening mostly dark. */
  minDarkWidth: 0.6,
  /** Share of an opening's pixels that are surely teeth or dark. */
  sure: 0.25,
  /**
   * Landmarks whose inner lips are this far apart (of the face size) are trusted: the sheet's
   * smiles read closed are 0.029-0.030 apart, those the landmarks draw well 0.045 and more.
   */
  trusted: 0.04,
  /**
   * The opening's edge is drawn this far (of the face size) inside the outermost sure pixels: the
   * hole's soft edge (mouth.ts) ends there and the source's lips overlap the teeth's blurred edge.
   * Every tooth shown is the target's and reads as its identity: sample4's third woman, open by
   * the pixels, swapped at 0.361 with her teeth painted over, 0.380 at 0, 0.375 at 0.01, 0.371 at 0.02.
   */
  inset: 0.02,
  /** The outer lip line grown by this (of the face size) to look for the opening in. */
  grow: 0.015,
  /**
   * A mouth whose pixels show an opening (showsOpening): one kept, or teeth or dark pixels, sure or
   * possible, over this share of the face size squared.
   */
  shows: 0.0035,
};

/** Where the mouth's axis runs (corner 48 to corner 54) and its width. */
function axisOf(lm: readonly Point[]) {
  const a = lm[48]!;
  const b = lm[54]!;
  const width = Math.hypot(b.x - a.x, b.y - a.y);
  const ux = (b.x - a.x) / width;
  const uy = (b.y - a.y) / width;
  return {
    width,
    /** Along the mouth from corner 48, and across it (downwards positive). */
    u: (x: number, y: number) => (x - a.x) * ux + (y - a.y) * uy,
    v: (x: number, y: number) => -(x - a.x) * uy + (y - a.y) * ux,
    at: (u: number, v: number): Point => ({ x: a.x + u * ux - v * uy, y: a.y + u * uy + v * ux }),
  };
}

/** The outer lip line's polygon pushed out from its centre by `d` px. */
function grown(poly: readonly Point[], d: number): Point[] {
  const cx = poly.reduce((s, p) => s + p.x, 0) / poly.length;
  const cy = poly.reduce((s, p) => s + p.y, 0) / poly.length;
  return poly.map((p) => {
    const r = Math.hypot(p.x - cx, p.y - cy) || 1;
    return { x: p.x + ((p.x - cx) / r) * d, y: p.y + ((p.y - cy) / r) * d };
  });
}

export interface OpeningMask {
  region: Region;
  /** 1, 2: a sure or possible pixel of the opening (teeth or dark); 3, 4: the same in a component kept as the opening. */
  mask: Uint8Array;
  /** 1 where such a pixel is the throat's dark (possibly), not a tooth. */
  dark: Uint8Array;
  /** 1 where such a pixel is no redder than a tooth (OPENING.teethRed): not a lip's. */
  unred: Uint8Array;
}

/** The pixels of the opening between the outer lips of `lm` in `img` (level frame). */
export function openingMask(img: RgbImage, lm: readonly Point[]): OpeningMask {
  const size = faceSize(lm);
  const outer = lm.slice(48, 60);
  const region = boundingRegion(outer, 0.12 * size, img.width, img.height);
  const { width: w, height: h } = region;
  const lab = regionLab(img, region);
  const inside = rasterizePolygon(grown(outer, OPENING.grow * size), region);
  const around = rasterizePolygon(grown(outer, 0.08 * size), region);
  const near = rasterizePolygon(grown(outer, 0.03 * size), region);
  const chroma: number[] = [];
  const light: number[] = [];
  const red: number[] = [];
  for (let i = 0; i < w * h; i++) {
    if (!around[i] || near[i]) continue;
    light.push(lab[i * 3]!);
    red.push(lab[i * 3 + 1]!);
    chroma.push(Math.hypot(lab[i * 3 + 1]!, lab[i * 3 + 2]!));
  }
  const L0 = medianOf(light);
  const C0 = medianOf(chroma);
  const S0 = C0 / Math.max(1, L0);
  const mask = new Uint8Array(w * h);
  for (let i = 0; i < w * h; i++) {
    if (!inside[i]) continue;
    const L = lab[i * 3]!;
    const C = Math.hypot(lab[i * 3 + 1]!, lab[i * 3 + 2]!);
    for (const k of [0, 1]) {
      const teeth = L >= OPENING.teethLight[k]! * L0 && C <= OPENING.teethSaturation[k]! * S0 * L;
      // The throat's dark is no more chromatic than the skin; dark lipstick and the lips' line are.
      if (teeth || (L <= OPENING.dark[k]! * L0 && C <= C0)) {
        mask[i] = 1 + k;
        break;
      }
    }
  }
  const dark = new Uint8Array(w * h);
  const unred = new Uint8Array(w * h);
  const A0 = medianOf(red);
  for (let i = 0; i < w * h; i++) {
    dark[i] = mask[i] && lab[i * 3]! <= OPENING.dark[1]! * L0 ? 1 : 0;
    unred[i] = mask[i] && lab[i * 3 + 1]! <= OPENING.teethRed * A0 ? 1 : 0;
  }
  keepBands(mask, region, lm, (i) => dark[i] === 1);
  return { region, mask, dark, unred };
}

/**
 * Marks (+2) the 8-connected components of `mask` (sure and possible pixels) that reach the
 * landmarks' inner lip line, span enough of the mouth's width, are as thick as an open mouth's gap
 * and hold enough sure pixels.
 */
function keepBands(mask: Uint8Array, region: Region, lm: readonly Point[], isDark: (i: number) => boolean): void {
  const { width: w, height: h } = region;
  const axis = axisOf(lm);
  const line = rasterizePolygon(grown(lm.slice(60, 68), OPENING.grow * faceSize(lm)), region);
  const seen = new Uint8Array(w * h);
  const queue = new Int32Array(w * h);
  for (let s = 0; s < w * h; s++) {
    if (mask[s] !== 1 || seen[s]) continue;
    let n = 0;
    queue[n++] = s;
    seen[s] = 1;
    let u0 = Infinity;
    let u1 = -Infinity;
    let touches = false;
    let sure = 0;
    let dark = 0;
    for (let q = 0; q < n; q++) {
      const i = queue[q]!;
      touches ||= line[i] === 1;
      if (mask[i] === 1) sure++;
      if (isDark(i)) dark++;
      const x = i % w;
      const y = (i - x) / w;
      const u = axis.u(x + region.left + 0.5, y + region.top + 0.5);
      u0 = Math.min(u0, u);
      u1 = Math.max(u1, u);
      for (let dy = -1; dy <= 1; dy++) {
        for (let dx = -1; dx <= 1; dx++) {
          const xx = x + dx;
          const yy = y + dy;
          if (xx < 0 || yy < 0 || xx >= w || yy >= h) continue;
          const j = yy * w + xx;
          if ((mask[j] === 1 || mask[j] === 2) && !seen[j]) {
            seen[j] = 1;
            queue[n++] = j;
          }
        }
      }
    }
    // Dark lipstick can pass for the throat's dark over a lip's end; an open mouth's dark spans more of it.
    const wide = u1 - u0 >= (2 * dark > n ? OPENING.minDarkWidth : OPENING.minWidth) * axis.width;
    // As thick on average as an open mouth's gap, and not a faint band (a lip's pale border).
    const thick = n >= OPEN_GAP * faceSize(lm) * (u1 - u0);
    if (!touches || !wide || !thick || sure < OPENING.sure * n) continue;
    for (let q = 0; q < n; q++) mask[queue[q]!] = mask[queue[q]!]! + 2;
  }
}

/**
 * `lm` with its inner lip points (61-63, 65-67) moved out to the opening found in the pixels,
 * where that is wider than the landmarks draw it; `lm` itself when the landmarks draw the mouth
 * well open (OPENING.trusted), when there is none, or when it is thinner than an open mouth's (OPEN_GAP).
 */
export function openedMouth(img: RgbImage, lm: readonly Point[]): readonly Point[] {
  if (mouthGap(lm, faceSize(lm)) >= OPENING.trusted) return lm;
  return widened(lm, openingMask(img, lm));
}

/** openedMouth's widening, given the opening's pixels. */
function widened(lm: readonly Point[], { region, mask }: OpeningMask): readonly Point[] {
  const size = faceSize(lm);
  if (mouthGap(lm, size) >= OPENING.trusted) return lm;
  const inset = OPENING.inset * size;
  const axis = axisOf(lm);
  const out = [...lm];
  for (const [a, b] of PAIRS) {
    const uc = (axis.u(lm[a]!.x, lm[a]!.y) + axis.u(lm[b]!.x, lm[b]!.y)) / 2;
    let v0 = Infinity;
    let v1 = -Infinity;
    for (let i = 0; i < mask.length; i++) {
      // Its extent from the sure pixels only: the possible ones join them, but spread along a pale lip.
      if (mask[i] !== 3) continue;
      const x = (i % region.width) + region.left + 0.5;
      const y = Math.floor(i / region.width) + region.top + 0.5;
      if (Math.abs(axis.u(x, y) - uc) > 1) continue;
      v0 = Math.min(v0, axis.v(x, y) - 0.5 + inset);
      v1 = Math.max(v1, axis.v(x, y) + 0.5 - inset);
    }
    if (v0 > v1) continue;
    const va = Math.min(axis.v(lm[a]!.x, lm[a]!.y), v0);
    const vb = Math.max(axis.v(lm[b]!.x, lm[b]!.y), v1);
    out[a] = axis.at(axis.u(lm[a]!.x, lm[a]!.y), va);
    out[b] = axis.at(axis.u(lm[b]!.x, lm[b]!.y), vb);
  }
  return mouthGap(out, size) >= OPEN_GAP && mouthGap(out, size) > mouthGap(lm, size) ? out : lm;
}

/**
 * The hole for the target's open mouth over `region` (mouth.ts's innerMouthHole): inside its inner
 * lip line (openedMouth's) and over the opening the pixels show (the kept bands). The landmarks of
 * a wide smile can draw the inner lips across the teeth and the dark of a corner, the outer upper
 * lip on the teeth's top edge (sample4 face 3: a thin lip stretched by the smile): the source's lips
 * were warped over them, a red lip over the teeth. Below the lower inner lip line only the throat's
 * dark and what is not red: a pale lower lip passes for teeth by its lightness (sample5 faces 0 and
 * 3), while the landmarks can draw the inner lower lip across the lower teeth (sample3's smile: its
 * lower teeth went under the source's lip and the mouth read nearly closed).
 * Only what is joined to the inner lip line: bits cut off beyond a corner came out as dark specks on
 * the new skin. Undefined when the mouth is closed.
 */
export function mouthHole(img: RgbImage, lm: readonly Point[], region: Region, size: number): Float32Array | undefined {
  const o = openingMask(img, lm);
  const opened = widened(lm, o);
  if (mouthGap(opened, size) < OPEN_GAP) return undefined;
  const below = rasterizePolygon(belowLowerLip(lm, size), o.region);
  const pixels = new Uint8Array(region.width * region.height);
  for (let y = 0; y < o.region.height; y++) {
    const yy = y + o.region.top - region.top;
    if (yy < 0 || yy >= region.height) continue;
    for (let x = 0; x < o.region.width; x++) {
      const xx = x + o.region.left - region.left;
      const j = y * o.region.width + x;
      if (xx < 0 || xx >= region.width || o.mask[j]! < 3 || (below[j] && !o.dark[j] && !o.unred[j])) continue;
      pixels[yy * region.width + xx] = 1;
    }
  }
  return innerMouthHole(opened, region, size, joined(pixels, rasterizePolygon(opened.slice(60, 68), region), region));
}

/** Lower inner lip points and the outer ones under them (67-58, 66-57, 65-56). */
const LOWER_LIP = [
  [67, 58],
  [66, 57],
  [65, 56],
] as const;

/**
 * `lm` with its lower lip (inner 65-67, outer 55-59) moved down over the lower teeth the pixels show
 * below its inner lip line (sure teeth, not red: mouthHole's), to OPENING.inset inside their lower
 * edge; `lm` itself when the mouth is closed or no teeth show there. The landmarks can draw a smile's
 * lower lip band on its lower teeth (sample3's dark-haired woman: the outer lower lip on the teeth's
 * lower edge, the lip itself below it): the source's lower lip was warped over the teeth, and with
 * the teeth kept, to nowhere (the result read as a closed mouth). Moved, it lands on the target's lip.
 */
export function loweredLip(img: RgbImage, lm: readonly Point[]): readonly Point[] {
  const size = faceSize(lm);
  if (mouthGap(lm, size) < OPEN_GAP) return lm;
  const { region, mask, dark, unred } = openingMask(img, lm);
  const below = rasterizePolygon(belowLowerLip(lm, size), region);
  const axis = axisOf(lm);
  const out = [...lm];
  const drops = LOWER_LIP.map(([a, b]) => {
    const ua = axis.u(lm[a]!.x, lm[a]!.y);
    const va = axis.v(lm[a]!.x, lm[a]!.y);
    let v1 = -Infinity;
    for (let j = 0; j < mask.length; j++) {
      if (mask[j] !== 3 || !below[j] || !unred[j] || dark[j]) continue;
      const x = (j % region.width) + region.left + 0.5;
      const y = Math.floor(j / region.width) + region.top + 0.5;
      if (Math.abs(axis.u(x, y) - ua) <= 1) v1 = Math.max(v1, axis.v(x, y) + 0.5 - OPENING.inset * size);
    }
    const drop = Math.max(0, v1 - va);
    out[a] = axis.at(ua, va + drop);
    out[b] = axis.at(axis.u(lm[b]!.x, lm[b]!.y), axis.v(lm[b]!.x, lm[b]!.y) + drop);
    return drop;
  });
  // The outer points beside the corners (59 by 58, 55 by 56) half as far.
  for (const [i, drop] of [
    [59, drops[0]! / 2],
    [55, drops[2]! / 2],
  ] as const) {
    out[i] = axis.at(axis.u(lm[i]!.x, lm[i]!.y), axis.v(lm[i]!.x, lm[i]!.y) + drop);
  }
  return out;
}

/** Everything below the lower inner lip line (60, 67-64), within `reach` px of it and of the corners. */
function belowLowerLip(lm: readonly Point[], reach: number): Point[] {
  const axis = axisOf(lm);
  const u0 = axis.u(lm[60]!.x, lm[60]!.y);
  const v0 = axis.v(lm[60]!.x, lm[60]!.y);
  const u1 = axis.u(lm[64]!.x, lm[64]!.y);
  const v1 = axis.v(lm[64]!.x, lm[64]!.y);
  return [
    axis.at(u0 - reach, v0),
    ...[60, 67, 66, 65, 64].map((i) => lm[i]!),
    axis.at(u1 + reach, v1),
    axis.at(u1 + reach, v1 + reach),
    axis.at(u0 - reach, v0 + reach),
  ];
}

/** The pixels of `mask` joined (8-connected, through `mask`) to `seed`. */
function joined(mask: Uint8Array, seed: Uint8Array, { width: w, height: h }: Region): Uint8Array {
  const out = new Uint8Array(w * h);
  const queue = new Int32Array(w * h);
  let n = 0;
  for (let i = 0; i < w * h; i++) if (seed[i]) queue[n++] = i;
  flood8(mask, out, queue, n, w, h);
  return out;
}

/**
 * Whether the pixels between `lm`'s lips show an opening (teeth or the throat's dark): a component
 * kept as one, or OPENING.shows of such pixels. The landmarks draw some closed mouths open (full
 * lips, a face turned down: sample2's second woman, inner lips 0.04-0.05 of the face size apart,
 * 0.002 of such pixels), where a smiling source's teeth went onto the target's closed lips, a grin.
 */
export function showsOpening(img: RgbImage, lm: readonly Point[]): boolean {
  const { mask } = openingMask(img, lm);
  let n = 0;
  for (const v of mask) {
    if (v >= 3) return true;
    if (v >= 1) n++;
  }
  return n >= OPENING.shows * faceSize(lm) ** 2;
}
