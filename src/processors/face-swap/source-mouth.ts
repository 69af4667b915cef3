/**
 * The source's opening on a closed target mouth. A smiling source shows its teeth, and the 68-point
 * net often draws its inner lips closed along the teeth's top edge and its outer lower lip across
 * the teeth (the README example's source: inner lips 1% of the face size apart, the lower outer lip
 * through the middle of the teeth): the warp then takes the teeth as lower lip and lays them over a
 * closed target's lower lip, a toothy grin on a closed mouth. Here the opening is read from the
 * source's pixels (teeth: lighter and less chromatic than its lips; the throat's dark; and the
 * opening opening.ts reads on a target), warped with the face, and the target's own mouth is shown
 * there, its colour moved half-way to the new lips' (as Deep-Live-Cam's mouth mask lays the
 * target's mouth over the swap).
 */
import { labToRgb, regionLab, rgbToLab } from './color.js';
import { boundingRegion, faceSize, type Region } from './geometry.js';
import { dilate, featherMask, fillFromSurroundings, flood8, rasterizePolygon } from './mask.js';
import { bytes, floats } from './scratch.js';
import { mouthGap, OPEN_GAP } from './mouth.js';
import { openingMask, showsOpening } from './opening.js';
import { medianOf } from './select.js';
import type { Point, RgbImage } from './types.js';
import { warpPiecewiseAffine } from './warp.js';

export const LIP_EDGE = {
  /** The lips' a* at least this much above the skin's for a lip below the landmarks' to be read (missedLip). */
  contrast: 12,
  /** How far (of the face size) outside the outer lip line it is looked for. */
  reach: 0.12,
  /** How far beyond a corner (of the face size) the mouth's dark is looked for (darkCorners)... */
  corner: 0.06,
  /** ...at most this share of the skin's lightness. */
  dark: 0.75,
};

export const SOURCE_MOUTH = {
  /**
   * The outer lip line grown by this (of the face size) to look for the opening: the net can draw
   * it across the teeth, and the teeth must lie inside, lips around them (keepOpenings: 0.05 cut
   * the README example's source's teeth at its edge).
   */
  grow: 0.08,
  /** A tooth is at least this much lighter (L*) than the lips, [sure, possible]... */
  teethLighter: [6, 3],
  /** ...and at most this share of their chroma. */
  teethChroma: [0.7, 0.85],
  /**
   * As opening.ts reads a target's: a tooth is also at least `skinLight` of the lightness of the
   * skin around the mouth (its median 6-12% of the face size outside the outer lip line) and at
   * most `skinSaturation` of its saturation (C* / L*), [sure, possible]: skin beside the lips is
   * lighter and less chromatic than the lips too.
   */
  skinLight: [1, 0.9],
  skinSaturation: [0.7, 0.85],
  /** The throat's dark: at most this share of the skin's lightness, and no more chromatic than skin or lips. */
  dark: [0.45, 0.55],
  /** An opening spans at least this share of the mouth's width (corner to corner): a lip's highlight does not. */
  minWidth: 0.35,
  /** ...is on average this thick (of the face size) across its span... */
  minThick: 0.025,
  /** ...and this share of its pixels are surely teeth or dark... */
  sure: 0.25,
  /**
   * ...and it touches the edge of where it is looked for (pixels) along less than this share of its
   * span: skin runs on out of it (sample1's purple lips, sample2's pale ones: their borders read as
   * an opening before; sample3's dark-haired woman: the skin above her upper lip).
   */
  edgeContact: 0.25,
  /** Soft edge of the warped opening (of the target's face size). */
  edge: 0.01,
  /**
   * The opening grown by this (of the source's face size) is what of the source's mouth may land
   * beyond the target's lips (its lips around the opening, drawn inside the landmarks' line or
   * not): 0.02 left a pink rim of the source's lower lip below the target's (the README example's
   * source into sample3's curly blonde).
   */
  around: 0.05,
  /**
   * How far the target's shown lips move from their colour (a*, b*) towards the new lips': all of
   * the way, a pale source's lips over the target's lightness (her lip line, her gloss) read as
   * teeth between parted lips (the README example: a grimace); half-way they read as lips.
   */
  lipColour: 0.5,
};

/** Medians of L* and C* of the more chromatic half of the pixels inside the outer lip line: the lips, not the teeth. */
function lipColour(lab: Float32Array, lips: Uint8Array): { L: number; C: number } {
  const px: { L: number; C: number }[] = [];
  for (let i = 0; i < lips.length; i++) {
    if (lips[i]) px.push({ L: lab[i * 3]!, C: Math.hypot(lab[i * 3 + 1]!, lab[i * 3 + 2]!) });
  }
  px.sort((a, b) => b.C - a.C);
  const half = px.slice(0, Math.max(1, px.length >> 1));
  return { L: medianOf(half.map((p) => p.L)), C: medianOf(half.map((p) => p.C)) };
}

/** A source's mouth as read once: its region's Lab, its lips and the skin around them. */
interface MouthRead {
  region: Region;
  size: number;
  /** The outer lip line (48-59). */
  outer: readonly Point[];
  lab: Float32Array;
  /** 1 inside the outer lip line. */
  lips: Uint8Array;
  /** 1 on the skin 6-12% of the face size outside it. */
  ring: Uint8Array;
}

function readMouth(img: RgbImage, lm: readonly Point[], region: Region, size: number): MouthRead {
  const outer = lm.slice(48, 60);
  const ring = rasterizePolygon(grownPolygon(outer, 0.12 * size), region);
  const near = rasterizePolygon(grownPolygon(outer, 0.06 * size), region);
  for (let i = 0; i < ring.length; i++) if (near[i]) ring[i] = 0;
  const lips = rasterizePolygon(outer, region);
  return { region, size, outer, lab: regionLab(img, region), lips, ring };
}

/** Medians of L*, C* and C* / L* of the skin ring (read once per source mouth, for its teeth and corners). */
function skinColour({ lab, ring }: MouthRead) {
  const L: number[] = [];
  const C: number[] = [];
  const S: number[] = [];
  for (let i = 0; i < ring.length; i++) {
    if (!ring[i]) continue;
    const c = Math.hypot(lab[i * 3 + 1]!, lab[i * 3 + 2]!);
    L.push(lab[i * 3]!);
    C.push(c);
    S.push(c / Math.max(1, lab[i * 3]!));
  }
  return { L: medianOf(L), C: medianOf(C), S: medianOf(S) };
}
type SkinColour = ReturnType<typeof skinColour>;

/** 1 (sure) or 2 (possible) where a pixel of `region` near the mouth looks like teeth or the throat's dark. */
function classify(m: MouthRead, skin: SkinColour, near: Uint8Array): Uint8Array {
  const { width: w, height: h } = m.region;
  const lab = m.lab;
  const lip = lipColour(lab, m.lips);
  const mask = new Uint8Array(w * h);
  const { teethLighter, teethChroma, skinLight, skinSaturation, dark } = SOURCE_MOUTH;
  for (let i = 0; i < w * h; i++) {
    if (!near[i]) continue;
    const L = lab[i * 3]!;
    const C = Math.hypot(lab[i * 3 + 1]!, lab[i * 3 + 2]!);
    for (const k of [0, 1]) {
      const teeth =
        L >= lip.L + teethLighter[k]! &&
        C <= teethChroma[k]! * lip.C &&
        L >= skinLight[k]! * skin.L &&
        C <= skinSaturation[k]! * skin.S * L;
      if (teeth || (L <= dark[k]! * skin.L && C <= Math.min(lip.C, skin.C))) {
        mask[i] = 1 + k;
        break;
      }
    }
  }
  return mask;
}

/** `poly` pushed out from its centre by `d` px. */
function grownPolygon(poly: readonly Point[], d: number): Point[] {
  const cx = poly.reduce((s, p) => s + p.x, 0) / poly.length;
  const cy = poly.reduce((s, p) => s + p.y, 0) / poly.length;
  return poly.map((p) => {
    const r = Math.hypot(p.x - cx, p.y - cy) || 1;
    return { x: p.x + ((p.x - cx) / r) * d, y: p.y + ((p.y - cy) / r) * d };
  });
}

/**
 * Keeps (sets to 3) the 8-connected components of `mask` that cross the mouth's middle (between
 * its corners), span enough of its width, are thick enough, hold enough sure pixels and lie
 * between the lips: skin beside them can pass for teeth (sample3's dark-haired woman: a band above
 * her upper lip, lighter than the skin around and as little saturated as teeth), but runs on out of
 * `near`, where the opening is looked for. Possible pixels joined to that edge through possible
 * ones only are skin's too, and do not join teeth to it.
 */
function keepOpenings(mask: Uint8Array, near: Uint8Array, region: Region, lm: readonly Point[]): void {
  const { width: w, height: h } = region;
  const a = lm[48]!;
  const b = lm[54]!;
  const width = Math.hypot(b.x - a.x, b.y - a.y);
  const along = (i: number) =>
    (((i % w) + region.left + 0.5 - a.x) * (b.x - a.x) + (Math.floor(i / w) + region.top + 0.5 - a.y) * (b.y - a.y)) /
    width;
  const atEdge = (i: number) => {
    const x = i % w;
    return (
      x === 0 ||
      x === w - 1 ||
      i < w ||
      i >= w * (h - 1) ||
      !near[i - 1] ||
      !near[i + 1] ||
      !near[i - w] ||
      !near[i + w]
    );
  };
  dropEdgeJoined(mask, atEdge, w, h);
  const seen = new Uint8Array(w * h);
  const queue = new Int32Array(w * h);
  for (let s = 0; s < w * h; s++) {
    if (mask[s] !== 1 || seen[s]) continue;
    queue[0] = s;
    seen[s] = 1;
    const n = flood8(mask, seen, queue, 1, w, h);
    let u0 = Infinity;
    let u1 = -Infinity;
    let sure = 0;
    let edge = 0;
    for (let q = 0; q < n; q++) {
      const i = queue[q]!;
      if (mask[i] === 1) sure++;
      if (atEdge(i)) edge++;
      u0 = Math.min(u0, along(i));
      u1 = Math.max(u1, along(i));
    }
    const wide = u1 - u0 >= SOURCE_MOUTH.minWidth * width && u0 < width / 2 && u1 > width / 2;
    const thick = n >= SOURCE_MOUTH.minThick * faceSize(lm) * (u1 - u0);
    const between = edge < SOURCE_MOUTH.edgeContact * (u1 - u0);
    if (!wide || !thick || !between || sure < SOURCE_MOUTH.sure * n) continue;
    for (let q = 0; q < n; q++) mask[queue[q]!] = 3;
  }
}

/** Clears the possible pixels (2) of `mask` joined to its edge through possible ones only: skin's. */
function dropEdgeJoined(mask: Uint8Array, atEdge: (i: number) => boolean, w: number, h: number): void {
  const possible = Uint8Array.from(mask, (m) => (m === 2 ? 1 : 0));
  const seen = new Uint8Array(w * h);
  const queue = new Int32Array(w * h);
  let n = 0;
  for (let i = 0; i < w * h; i++) {
    if (!possible[i] || !atEdge(i)) continue;
    seen[i] = 1;
    queue[n++] = i;
  }
  n = flood8(possible, seen, queue, n, w, h);
  for (let q = 0; q < n; q++) mask[queue[q]!] = 0;
}

/** The source's opening, by image and landmarks: video swaps one source into every frame. */
const lastOpening = new WeakMap<Uint8Array, { key: string; found: SourceOpening | undefined }>();

interface SourceOpening {
  region: Region;
  open: Uint8Array;
  /**
   * What of the source's mouth may land beyond the target's lips, over `region`: the opening
   * and the lips around it (SOURCE_MOUTH.around), its lower lip below its landmarks' outer lip line
   * (missedLip) and the dark of its corners (darkCorners).
   */
  beyond: Uint8Array;
}

/** The source's opening (1) over `region` of `img`, or undefined when it shows none. */
export function sourceOpening(img: RgbImage, lm: readonly Point[]): SourceOpening | undefined {
  const key = `${img.width}x${img.height}:${lm.map((p) => `${p.x},${p.y}`).join(';')}`;
  const hit = lastOpening.get(img.data);
  if (hit?.key === key) return hit.found;
  const found = readOpening(img, lm);
  lastOpening.set(img.data, { key, found });
  return found;
}

function readOpening(img: RgbImage, lm: readonly Point[]): SourceOpening | undefined {
  const size = faceSize(lm);
  const region = boundingRegion(lm.slice(48, 60), 0.13 * size, img.width, img.height);
  if (region.width < 4 || region.height < 4) return undefined;
  const m = readMouth(img, lm, region, size);
  const skin = skinColour(m);
  const near = rasterizePolygon(grownPolygon(m.outer, SOURCE_MOUTH.grow * size), region);
  const mask = classify(m, skin, near);
  keepOpenings(mask, near, region, lm);
  const open = new Uint8Array(mask.length);
  for (let i = 0; i < mask.length; i++) open[i] = mask[i] === 3 ? 1 : 0;
  // And the opening a target's mouth shows by the same pixels (opening.ts): a source whose
  // landmarks draw its smile about right, in warm light (sample4's third woman: her teeth as
  // saturated as 0.8 of the skin's, which the reading above takes for skin).
  const t = openingMask(img, lm);
  for (let y = 0; y < t.region.height; y++) {
    const yy = y + t.region.top - region.top;
    for (let x = 0; x < t.region.width; x++) {
      const xx = x + t.region.left - region.left;
      if (t.mask[y * t.region.width + x]! >= 3 && xx >= 0 && yy >= 0 && xx < region.width && yy < region.height) {
        open[yy * region.width + xx] = 1;
      }
    }
  }
  if (!open.includes(1)) return undefined;
  let beyond: Uint8Array = Uint8Array.from(open);
  for (let k = Math.round(SOURCE_MOUTH.around * size); k > 0; k--) beyond = dilate(beyond, region.width, region.height);
  const lip = missedLip(m, lm);
  const dark = darkCorners(m, skin, lm);
  for (let i = 0; i < lip.length; i++) beyond[i] = beyond[i]! | lip[i]! | dark[i]!;
  return { region, open, beyond };
}

/**
 * 1 where the source's lower lip lies below its landmarks' outer lip line: pixels below the line
 * between the corners, within LIP_EDGE.reach of the face size of that line, redder (a*) than
 * halfway from the skin's to the lips' and joined to the lips. The net can draw a smile's outer
 * lower lip along the lower teeth (sample3's dark-haired woman: her red lip 0.1 of the face size
 * below it); onto a closed target mouth the lip there was warped under the target's lips, a red V.
 * None when lips and skin are about as red (LIP_EDGE.contrast).
 */
function missedLip(m: MouthRead, lm: readonly Point[]): Uint8Array {
  const { region, size, outer, lab, lips } = m;
  const { width: w, height: h } = region;
  const red = lipAndSkinRed(m);
  const out = new Uint8Array(w * h);
  if (red.lip - red.skin < LIP_EDGE.contrast) return out;
  const reach = rasterizePolygon(grownPolygon(outer, LIP_EDGE.reach * size), region);
  const [a, b] = [lm[48]!, lm[54]!];
  const below = (i: number) =>
    (b.x - a.x) * (Math.floor(i / w) + region.top + 0.5 - a.y) - (b.y - a.y) * ((i % w) + region.left + 0.5 - a.x) > 0;
  const candidate = new Uint8Array(w * h);
  for (let i = 0; i < w * h; i++) {
    candidate[i] = reach[i] && below(i) && lab[i * 3 + 1]! >= (red.lip + red.skin) / 2 ? 1 : 0;
  }
  const queue = new Int32Array(w * h);
  let n = 0;
  for (let i = 0; i < w * h; i++) if (lips[i] && candidate[i]) queue[n++] = i;
  const seen = Uint8Array.from(lips);
  n = flood8(candidate, seen, queue, n, w, h);
  for (let q = 0; q < n; q++) if (!lips[queue[q]!]) out[queue[q]!] = 1;
  return out;
}

/**
 * 1 where the source's open mouth runs on dark beyond its landmarks' corners (48, 54): pixels
 * outside the outer lip line within LIP_EDGE.corner of the face size of a corner and at most
 * LIP_EDGE.dark of the skin's lightness. The net can put a smile's corners inside its dark ends
 * (the README example's source: her right one, 5-10 px below and beyond it, L* 28-34 where the skin
 * is 52); onto a closed target mouth that dark was warped beyond its corner, a sliver.
 */
function darkCorners(m: MouthRead, skin: SkinColour, lm: readonly Point[]): Uint8Array {
  const { region, size, lab, lips } = m;
  const out = new Uint8Array(region.width * region.height);
  for (let i = 0; i < out.length; i++) {
    const x = (i % region.width) + region.left + 0.5;
    const y = Math.floor(i / region.width) + region.top + 0.5;
    const d = Math.min(Math.hypot(x - lm[48]!.x, y - lm[48]!.y), Math.hypot(x - lm[54]!.x, y - lm[54]!.y));
    out[i] = !lips[i] && d <= LIP_EDGE.corner * size && lab[i * 3]! <= LIP_EDGE.dark * skin.L ? 1 : 0;
  }
  return out;
}

/** Median a* of the more chromatic half of the lips, and of the skin ring. */
function lipAndSkinRed({ lab, lips, ring }: MouthRead) {
  const px: { a: number; C: number }[] = [];
  for (let i = 0; i < lips.length; i++) {
    if (lips[i]) px.push({ a: lab[i * 3 + 1]!, C: Math.hypot(lab[i * 3 + 1]!, lab[i * 3 + 2]!) });
  }
  px.sort((p, q) => q.C - p.C);
  const skin: number[] = [];
  for (let i = 0; i < ring.length; i++) if (ring[i]) skin.push(lab[i * 3 + 1]!);
  return { lip: medianOf(px.slice(0, Math.max(1, px.length >> 1)).map((p) => p.a)), skin: medianOf(skin) };
}

/** What the hook needs of the warp: the source (at its placed scale) and both point sets with their triangles. */
export interface MouthWarp {
  src: RgbImage;
  srcPts: readonly Point[];
  dstPts: readonly Point[];
  triangles: Uint32Array;
}

/**
 * 0..1 over `region`: where the source's opening lands in the result (warped as the face is, only
 * through the triangles with a mouth point, softened); undefined when the source shows none.
 */
export function warpedOpening(w: MouthWarp, region: Region, size: number): Float32Array | undefined {
  const found = sourceOpening(w.src, w.srcPts.slice(0, 68));
  return found && warpedMask(w, found.region, found.open, region, size);
}

/** 0..1 over `region`: where `mask` (over the source's `r`) lands in the result, as warpedOpening. */
function warpedMask(w: MouthWarp, r: Region, mask: Uint8Array, region: Region, size: number): Float32Array {
  const img: RgbImage = { width: r.width, height: r.height, data: new Uint8Array(r.width * r.height * 3) };
  for (let i = 0; i < mask.length; i++) if (mask[i]) img.data.fill(255, i * 3, i * 3 + 3);
  const pts = w.srcPts.map((p) => ({ x: p.x - r.left, y: p.y - r.top }));
  const mouth: number[] = [];
  for (let t = 0; t < w.triangles.length; t += 3) {
    const tri = [w.triangles[t]!, w.triangles[t + 1]!, w.triangles[t + 2]!];
    if (tri.some((v) => v >= 48 && v < 68)) mouth.push(...tri);
  }
  const { rgb } = warpPiecewiseAffine(img, pts, w.dstPts, Uint32Array.from(mouth), region, 'bilinear');
  const n = region.width * region.height;
  const hard = new Uint8Array(n);
  for (let i = 0; i < n; i++) hard[i] = rgb[i * 3]! >= 64 ? 1 : 0;
  const soft = featherMask(hard, region.width, region.height, Math.max(1, Math.round(SOURCE_MOUTH.edge * size)));
  const out = floats(n);
  for (let i = 0; i < n; i++) out[i] = hard[i] ? 1 : Math.min(1, 2 * soft[i]!);
  return out;
}

/**
 * Where the source's mouth lands beyond the target's lips (SourceOpening.beyond; `face` over
 * `region`, in place): the target's own skin there, moved (L*a*b*) by the difference of the new face
 * and the target's around it, interpolated smoothly across it (mask.ts's fillFromSurroundings), so
 * it joins the new skin. Its lips are showTargetLips'. The source's opening and lower lip below the
 * target's, left to the new face, came out as a pale V hanging from her lips (the README example's
 * source into sample3's curly blonde) and a tooth beyond her mouth's corner (the README example).
 */
function showTargetSkin(
  target: RgbImage,
  targetLm: readonly Point[],
  w: MouthWarp,
  region: Region,
  face: Float32Array,
) {
  const found = sourceOpening(w.src, w.srcPts.slice(0, 68));
  if (!found) return;
  const m = warpedMask(w, found.region, found.beyond, region, faceSize(targetLm));
  const n = region.width * region.height;
  const lab = regionLab(target, region);
  const shift = rgbToLab(face);
  for (let i = 0; i < n * 3; i++) shift[i] = shift[i]! - lab[i]!;
  const hole = bytes(n);
  const known = rasterizePolygon(targetLm.slice(48, 60), region);
  for (let i = 0; i < n; i++) {
    if (known[i]) m[i] = 0;
    hole[i] = m[i]! > 0 ? 1 : 0;
    known[i] = known[i] || hole[i] ? 0 : 1;
  }
  fillFromSurroundings(shift, hole, known, region.width, region.height);
  for (let i = 0; i < n * 3; i++) lab[i] = lab[i]! + shift[i]!;
  const shown = labToRgb(lab);
  for (let i = 0; i < n * 3; i++) {
    const a = m[(i / 3) | 0]!;
    if (a > 0) face[i] = face[i]! * (1 - a) + Math.min(255, Math.max(0, shown[i]!)) * a;
  }
}

/** Mean L*a*b* of the more chromatic half of `lab` where `use` is set: the lips, not teeth or a highlight (undefined if nowhere). */
function lipMean(lab: Float32Array, use: Uint8Array): [number, number, number] | undefined {
  const idx: number[] = [];
  for (let i = 0; i < use.length; i++) if (use[i]) idx.push(i);
  if (!idx.length) return undefined;
  const chroma = (i: number) => Math.hypot(lab[i * 3 + 1]!, lab[i * 3 + 2]!);
  idx.sort((a, b) => chroma(b) - chroma(a));
  const half = idx.slice(0, Math.max(1, idx.length >> 1));
  const m: [number, number, number] = [0, 0, 0];
  for (const i of half) for (let c = 0; c < 3; c++) m[c] = m[c]! + lab[i * 3 + c]! / half.length;
  return m;
}

/** The target's lower lip band: its inner lip line (60, 67-64) and its outer lower lip line (54-48). */
const LOWER_LIP = [48, 60, 67, 66, 65, 64, 54, 55, 56, 57, 58, 59] as const;
/** The target's outer lip line (48-59): both lips and the line between them. */
const OUTER_LIPS = [48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59] as const;

/**
 * `opening` (0..1 over `region`) with the target's whole mouth (its outer lip line) where the
 * opening reaches it, softened as the opening is: the source's opening lands on the lips (the net
 * draws the source's lower lip across its teeth). The target's lip shown in the opening's shape
 * beside the source's lower lip below it read as a pale band over a pinker one (the README example:
 * her gloss across the lip); her lower lip alone, under the source's thin upper lip drawn along its
 * teeth's top edge, read as a parted mouth (a grimace): her closed mouth is shown whole.
 */
function withLips(opening: Float32Array, lm: readonly Point[], region: Region, size: number): Float32Array {
  const band = rasterizePolygon(
    OUTER_LIPS.map((i) => lm[i]!),
    region,
  );
  let reaches = false;
  for (let i = 0; i < band.length && !reaches; i++) reaches = band[i] === 1 && opening[i]! >= 1;
  if (!reaches) return opening;
  const soft = featherMask(band, region.width, region.height, Math.max(1, Math.round(SOURCE_MOUTH.edge * size)));
  const out = floats(band.length);
  for (let i = 0; i < band.length; i++) out[i] = Math.max(opening[i]!, band[i] ? 1 : Math.min(1, 2 * soft[i]!));
  return out;
}

/**
 * The target's own pixels where the source's opening lands (`face`, the new face over `region`, in
 * place), and over its whole mouth when its destination is the target's (a closed target mouth:
 * closesOnTarget; withLips): their colour (a*, b*) moved half-way from the target's lower lip's to
 * the new lips' (the more chromatic half of each; SOURCE_MOUTH.lipColour), their lightness the
 * target's. The lightness moved too lifted the README example's target's gloss with her lips to the
 * pale new lips' (+15 L*), a pale streak (teeth-like pixels on her lips 0.023 -> 0.069, now 0.029).
 * On an open target mouth the source's teeth, which its landmarks draw as lower lip, landed on the
 * target's lower lip below the target's own teeth: a second row of teeth (sample4 face 3, sample5
 * faces 0 and 3). Around them, showTargetSkin. Returns whether anything changed.
 */
export function showTargetLips(
  target: RgbImage,
  targetLm: readonly Point[],
  w: MouthWarp,
  region: Region,
  face: Float32Array,
): boolean {
  // Where placeSource closed the mouth (closesOnTarget), the destination's mouth is the target's.
  const closing = targetLm.slice(48, 68).every((p, k) => w.dstPts[48 + k]!.x === p.x && w.dstPts[48 + k]!.y === p.y);
  const size = faceSize(targetLm);
  const opening = warpedOpening(w, region, size);
  if (!opening) return false;
  const n = region.width * region.height;
  const shownAt = closing ? withLips(opening, targetLm, region, size) : opening;
  const read = readMouth(target, targetLm, region, size);
  const { lab, lips } = read;
  const lower = rasterizePolygon(
    LOWER_LIP.map((i) => targetLm[i]!),
    region,
  );
  // From the target's lower lip's colour to the new lips' (the more chromatic half of each: not teeth or gloss).
  const to = lipMean(rgbToLab(face), lips);
  const from = lipMean(lab, lower.includes(1) ? lower : lips);
  // Each pixel by how much of a lip it is (its a*, from the skin's to the lips'): the skin at a
  // corner, moved with the lips, came out a pale green glint.
  const red = lipAndSkinRed(read);
  const lipness = (i: number) =>
    Math.min(1, Math.max(0, (lab[i * 3 + 1]! - red.skin) / Math.max(1, red.lip - red.skin)));
  if (to && from) {
    for (let i = 0; i < n; i++) {
      if (!lips[i]) continue;
      const k = lipness(i);
      for (let c = 1; c < 3; c++) lab[i * 3 + c]! += SOURCE_MOUTH.lipColour * k * (to[c]! - from[c]!);
    }
  }
  const shown = labToRgb(lab);
  for (let i = 0; i < n * 3; i++) {
    const m = shownAt[(i / 3) | 0]!;
    if (m > 0) face[i] = face[i]! * (1 - m) + Math.min(255, Math.max(0, shown[i]!)) * m;
  }
  showTargetSkin(target, targetLm, w, region, face);
  return true;
}

/**
 * Whether a swap onto `targetLm` closes the source's mouth: the target's is closed (by its
 * landmarks, or by its pixels where the landmarks draw it open: showsOpening) and the source
 * shows an opening. Then the destination's mouth is the target's own (its expression: the source's
 * lips onto its lip bands; a smile's outline taken from the source drew a grin around the target's
 * closed lips), and showTargetLips covers where the source's opening lands.
 */
export function closesOnTarget(
  target: RgbImage,
  targetLm: readonly Point[],
  src: RgbImage,
  srcLm: readonly Point[],
): boolean {
  // The source's reading first: it is kept per source image (video swaps one into every frame).
  if (!sourceOpening(src, srcLm.slice(0, 68))) return false;
  return mouthGap(targetLm, faceSize(targetLm)) < OPEN_GAP || !showsOpening(target, targetLm);
}
