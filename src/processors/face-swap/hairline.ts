/**
 * The source's hair that its skin model calls skin, grown from the hairline (occlusion.ts, for the
 * source's hair fill). The skin model is one Gaussian over the whole face, and a face lit warm on one
 * side and cool on the other spreads it wide: sample3's curly blonde has a b* spread of 15, and her
 * blonde strand across the right temple (1.7-3.3 spreads from the skin, against a cut of 3.5) was
 * carried onto every target as skin, a pale crescent at the temple. Locally the two differ clearly
 * (the strand a* 17-20, b* 28-35; the forehead skin beside it a* 22-23, b* 19-23). So, on each side
 * of the face above the eye line: a hair model from the pixels just outside the outline, a skin model
 * from the skin a little further in, and the pixels near the outline nearer the hair's colour than the
 * skin's, joined to the outline through such pixels, are hair; and so is the strand's edge beside
 * them (its shadow on the skin, its lit rim), a thin band unlike the local skin.
 */
import { distanceInside, type Window } from './mask.js';
import { medianAndSpread } from './select.js';
import { bytes, floats, ints } from './scratch.js';
import { browsAndEyes, type EyeLine } from './zone-moments.js';

/** Width (of the face size) of the band just outside the outline the hair's colour is read from. */
const HAIR_BAND = 0.08;
/** Depth range (of the face size) inside the outline the local skin's colour is read from. */
const SKIN_FROM = 0.12;
const SKIN_TO = 0.25;
/**
 * How deep (of the face size) inside the outline hair is looked for: at 0.15 the curly blonde's
 * strand kept its pale edge beside the brow's end, 0.15-0.2 in.
 */
const HAIR_DEPTH = 0.2;
/** The farthest (of the face size) from the outline any of the three reaches. */
const REACH = Math.max(HAIR_BAND, SKIN_TO, HAIR_DEPTH);
/** Weight of lightness against a* and b* in the two distances (shading changes lightness most). */
const L_WEIGHT = 0.3;
/** Smallest spread (per channel) assumed for either model. */
const MIN_SPREAD = 2;
/** The hair's and the skin's chroma must lie this far apart (in their pooled spreads)... */
const MIN_SEPARATION = 2;
/** ...and a pixel be this much nearer the hair (difference of squared distances) to be hair... */
const NEARER = 3;
/** ...and within this squared distance of it (3 spreads): a brow's dark hairs are nearer neither. */
const HAIR_REACH2 = 9;
/**
 * The strand's own edge, its shadow on the skin and its lit rim: a band this wide (of the face size)
 * beside the hair found, 2 pixels or so wide at the curly blonde's temple (L* 59-63 and b* 27-31
 * against the forehead's 65 and 23). Left as skin, the fill took its shade, and the swap drew the
 * band as an arc from the brow's end to the hairline on every video frame.
 */
const EDGE_BAND = 0.025;
/**
 * A pixel of that band farther than this squared distance (2 spreads) from the local skin, in the
 * skin's own spreads and lightness weighed in full (a shadow differs from the skin by it most), is
 * the strand's.
 */
const EDGE_CUT2 = 4;
/** Share of the region beyond the outline whose colour must be known for the hair to be read. */
const KNOWN_SHARE = 0.9;
/** Fewest pixels (of the face size squared) a model is fitted from. */
const MIN_MODEL_AREA = 0.004;

/** The planes the hairline is read from (of occlusion's OcclusionPlanes). */
export interface HairlinePlanes {
  width: number;
  height: number;
  /** CIELAB, 3 per pixel. */
  lab: Float32Array;
  /** 1 where the skin model says non-skin (inside the outline only). */
  nonSkin: Uint8Array;
  /** 1 inside the face outline, and where the colour is known at all. */
  inside: Uint8Array;
  covered: Uint8Array;
  /** 1 at the outline. */
  edge: Uint8Array;
  zoneOf: Uint8Array;
  size: number;
}

/** Robust centre and spread (median, 1.4826 MAD) of L*, a*, b*. */
interface Model {
  m: [number, number, number];
  s: [number, number, number];
}

/**
 * 1 on the hair joined to the outline above the eye line that the skin model missed. Empty when
 * the colour beyond the outline is not known (a warped face) or an eye zone is missing, and on a
 * side where the colour outside the outline is not clearly other than the skin's (a background, or
 * hair of the skin's colour).
 */
export function hairlineHair(p: HairlinePlanes, eyeZones: readonly number[], browZones: readonly number[]): Uint8Array {
  const { width: w, height: h, size } = p;
  const hair = bytes(w * h);
  if (!knownBeyond(p)) return hair;
  const eyes = browsAndEyes(p.zoneOf, w, browZones, eyeZones)?.eyes;
  if (!eyes) return hair;
  const side = sides(w, h, eyes);
  const win = window(side, w, h, Math.ceil(REACH * size) + 1);
  if (!win) return hair;
  // Distances only in the window: exact up to REACH, which every test below stays within.
  const depth = distanceInside(p.inside, w, h, win);
  const outside = bytes(w * h);
  for (let y = win.top; y < win.top + win.height; y++) {
    for (let i = y * w + win.left; i < y * w + win.left + win.width; i++) outside[i] = 1 - p.inside[i]!;
  }
  const beyond = distanceInside(outside, w, h, win);
  const candidate = bytes(w * h);
  // Pixels unlike the local skin, where the hair found may spread by its edge band.
  const unlikeSkin = bytes(w * h);
  // Outside the zones, or on a brow (the strand over a brow's outer end; the hair fill keeps the
  // brow's own colour short of its end).
  const brow = Uint8Array.from({ length: 256 }, (_, z) => +(z === 0 || browZones.includes(z)));
  const planes: SidePlanes = { p, win, side, depth, beyond, at: ints(win.width * win.height) };
  for (const s of [1, 2]) {
    const hairModel = fit(planes, s, HAIR_PIXEL);
    const skinModel = fit(planes, s, SKIN_PIXEL);
    if (!hairModel || !skinModel) continue;
    const spread = pooled(hairModel, skinModel);
    const skinSpread = own(skinModel);
    if (Math.hypot(...[1, 2].map((c) => (hairModel.m[c]! - skinModel.m[c]!) / spread[c]!)) < MIN_SEPARATION) continue;
    const { left, top, width: ww, height: wh } = win;
    for (let y = 0; y < wh; y++) {
      for (let x = 0, i = (top + y) * w + left, j = y * ww; x < ww; x++, i++, j++) {
        if (side[i] !== s || !p.inside[i] || !brow[p.zoneOf[i]!] || depth[j]! > HAIR_DEPTH * size) continue;
        if (distance2(p.lab, i, skinModel, skinSpread, 1) > EDGE_CUT2) unlikeSkin[i] = 1;
        const toHair = distance2(p.lab, i, hairModel, spread);
        if (toHair < HAIR_REACH2 && distance2(p.lab, i, skinModel, spread) - toHair > NEARER) candidate[i] = 1;
      }
    }
  }
  // The candidates joined to the outline through candidates.
  for (let i = 0; i < w * h; i++) hair[i] = candidate[i]! & p.edge[i]!;
  growBy(hair, candidate, w, h);
  growBy(hair, unlikeSkin, w, h, Math.round(EDGE_BAND * size));
  return hair;
}

/**
 * Each pixel's side of the face above the eye line (1: eye 0's side, 2: eye 1's, split by the
 * normal through the eyes' midpoint), 0 below the eye line.
 */
function sides(w: number, h: number, e: EyeLine): Uint8Array {
  const out = bytes(w * h);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      if ((x - e.x) * e.nx + (y - e.y) * e.ny <= 0) continue;
      out[y * w + x] = (x - e.x) * e.ux + (y - e.y) * e.uy < 0 ? 1 : 2;
    }
  }
  return out;
}

/**
 * Whether the colour beyond the outline is known (`covered`) over KNOWN_SHARE of it: a face in its
 * own photo, not one warped onto a target (nothing beyond its outline but, on a turned face, a cheek
 * or the nose tip pushed past it).
 */
function knownBeyond(p: HairlinePlanes): boolean {
  let n = 0;
  let k = 0;
  for (let i = 0; i < p.inside.length; i++) {
    if (p.inside[i]) continue;
    n++;
    k += p.covered[i]!;
  }
  return n > 0 && k >= KNOWN_SHARE * n;
}

/** What `fit` reads, the distances per pixel of the window `win`. */
interface SidePlanes {
  p: HairlinePlanes;
  win: Window;
  side: Uint8Array;
  depth: Float32Array;
  beyond: Float32Array;
  /** Scratch for the picked pixels' indices (one pixel per window pixel at most). */
  at: Int32Array;
}

/** The pixels a model is fitted from: the hair's just outside the outline, the skin's a little in. */
const HAIR_PIXEL = 0;
const SKIN_PIXEL = 1;

/**
 * The pixels (region indices, into `out`) of side `s` a model of `kind` is fitted from: for the hair,
 * outside the outline within HAIR_BAND of it; for the skin, the skin model's skin outside the zones
 * between SKIN_FROM and SKIN_TO deep. Returns how many.
 */
function pick(sp: SidePlanes, s: number, kind: number, out: Int32Array): number {
  const { p, win, side, depth, beyond } = sp;
  const { width: w, size } = p;
  const { left, top, width: ww, height: wh } = win;
  let n = 0;
  for (let y = 0; y < wh; y++) {
    for (let x = 0, i = (top + y) * w + left, j = y * ww; x < ww; x++, i++, j++) {
      if (side[i] !== s) continue;
      const use =
        kind === HAIR_PIXEL
          ? p.inside[i] === 0 && beyond[j]! <= HAIR_BAND * size
          : p.inside[i] === 1 &&
            !p.nonSkin[i] &&
            !p.zoneOf[i] &&
            depth[j]! >= SKIN_FROM * size &&
            depth[j]! <= SKIN_TO * size;
      if (use) out[n++] = i;
    }
  }
  return n;
}

/** The robust model of side `s`'s pixels of `kind`, or undefined when there are too few. */
function fit(sp: SidePlanes, s: number, kind: number): Model | undefined {
  const { lab, size } = sp.p;
  const { at } = sp;
  const count = pick(sp, s, kind, at);
  if (count < MIN_MODEL_AREA * size * size) return undefined;
  const v = floats(count);
  const model: Model = { m: [0, 0, 0], s: [0, 0, 0] };
  for (let c = 0; c < 3; c++) {
    for (let k = 0; k < count; k++) v[k] = lab[at[k]! * 3 + c]!;
    ({ m: model.m[c], s: model.s[c] } = medianAndSpread(v));
  }
  return model;
}

/**
 * The bounding box of the pixels above the eye line (`side` set), grown by `reach` on every side
 * and clipped to the region; undefined when there are none.
 */
function window(side: Uint8Array, w: number, h: number, reach: number): Window | undefined {
  let x0 = w;
  let y0 = h;
  let x1 = -1;
  let y1 = -1;
  for (let y = 0; y < h; y++) {
    for (let x = 0, i = y * w; x < w; x++, i++) {
      if (!side[i]) continue;
      if (x < x0) x0 = x;
      if (x > x1) x1 = x;
      if (y < y0) y0 = y;
      y1 = y;
    }
  }
  if (x1 < 0) return undefined;
  const left = Math.max(0, x0 - reach);
  const top = Math.max(0, y0 - reach);
  return { left, top, width: Math.min(w, x1 + reach + 1) - left, height: Math.min(h, y1 + reach + 1) - top };
}

/** Per channel, the root mean square of the two models' spreads (at least MIN_SPREAD). */
function pooled(a: Model, b: Model): [number, number, number] {
  return [0, 1, 2].map((c) => Math.max(MIN_SPREAD, Math.hypot(a.s[c]!, b.s[c]!) / Math.SQRT2)) as [
    number,
    number,
    number,
  ];
}

/** A model's own spreads (at least MIN_SPREAD). */
function own(m: Model): [number, number, number] {
  return m.s.map((s) => Math.max(MIN_SPREAD, s)) as [number, number, number];
}

/** Squared distance of pixel i from the model's centre, in `spread`, lightness weighted by `lWeight`. */
function distance2(lab: Float32Array, i: number, m: Model, spread: readonly number[], lWeight = L_WEIGHT): number {
  let d = 0;
  for (let c = 0; c < 3; c++) d += (c === 0 ? lWeight : 1) * ((lab[i * 3 + c]! - m.m[c]!) / spread[c]!) ** 2;
  return d;
}

/**
 * Grows `mask` (in place) over the `candidate` pixels within `steps` (4-connected, through
 * candidates) of it; all those joined to it by default.
 */
function growBy(mask: Uint8Array, candidate: Uint8Array, w: number, h: number, steps = Infinity): void {
  let front: number[] = [];
  for (let i = 0; i < w * h; i++) if (mask[i]) front.push(i);
  for (let k = 0; k < steps && front.length; k++) {
    const next: number[] = [];
    const visit = (j: number) => {
      if (mask[j] || !candidate[j]) return;
      mask[j] = 1;
      next.push(j);
    };
    for (const i of front) {
      const x = i % w;
      if (x > 0) visit(i - 1);
      if (x < w - 1) visit(i + 1);
      if (i >= w) visit(i - w);
      if (i + w < w * h) visit(i + w);
    }
    front = next;
  }
}
