/**
 * The source's opening on a closed target mouth. A smiling source shows its teeth, and the 68-point
 * net often draws its inner lips closed along the teeth's top edge and its outer lower lip across
 * the teeth (the README example's source: inner lips 1% of the face size apart, the lower outer lip
 * through the middle of the teeth): the warp then takes the teeth as lower lip and lays them over a
 * closed target's lower lip, a toothy grin on a closed mouth. Here the opening is read from the
 * source's pixels (teeth: lighter and less chromatic than its lips; the throat's dark; and the
 * opening opening.ts reads on a target), warped with the face, and the target's own lips are shown there, shifted to the colour of the new lips around
 * them (as Deep-Live-Cam's mouth mask lays the target's mouth over the swap).
 */
import { labToRgb, regionRgb, rgbToLab } from './color.js';
import { boundingRegion, faceSize, type Region } from './geometry.js';
import { featherMask, flood8, rasterizePolygon } from './mask.js';
import { floats } from './scratch.js';
import { mouthGap, OPEN_GAP } from './mouth.js';
import { openingMask } from './opening.js';
import { medianOf } from './select.js';
import type { Point, RgbImage } from './types.js';
import { warpPiecewiseAffine } from './warp.js';

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

/** Medians of L*, C* and C* / L* of the skin 6-12% of the face size outside the outer lip line. */
function skinColour(lab: Float32Array, outer: readonly Point[], size: number, region: Region) {
  const ring = rasterizePolygon(grownPolygon(outer, 0.12 * size), region);
  const near = rasterizePolygon(grownPolygon(outer, 0.06 * size), region);
  const L: number[] = [];
  const C: number[] = [];
  const S: number[] = [];
  for (let i = 0; i < ring.length; i++) {
    if (!ring[i] || near[i]) continue;
    const c = Math.hypot(lab[i * 3 + 1]!, lab[i * 3 + 2]!);
    L.push(lab[i * 3]!);
    C.push(c);
    S.push(c / Math.max(1, lab[i * 3]!));
  }
  return { L: medianOf(L), C: medianOf(C), S: medianOf(S) };
}

/** 1 (sure) or 2 (possible) where a pixel of `region` near the mouth looks like teeth or the throat's dark. */
function classify(img: RgbImage, lm: readonly Point[], region: Region, near: Uint8Array): Uint8Array {
  const size = faceSize(lm);
  const { width: w, height: h } = region;
  const lab = rgbToLab(regionRgb(img, region));
  const outer = lm.slice(48, 60);
  const lip = lipColour(lab, rasterizePolygon(outer, region));
  const skin = skinColour(lab, outer, size, region);
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
  const near = rasterizePolygon(grownPolygon(lm.slice(48, 60), SOURCE_MOUTH.grow * size), region);
  const mask = classify(img, lm, region, near);
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
  return open.includes(1) ? { region, open } : undefined;
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
  if (!found) return undefined;
  const { region: r, open } = found;
  const img: RgbImage = { width: r.width, height: r.height, data: new Uint8Array(r.width * r.height * 3) };
  for (let i = 0; i < open.length; i++) if (open[i]) img.data.fill(255, i * 3, i * 3 + 3);
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

/**
 * On a closed target mouth whose destination is the target's own (closesOnTarget), the target's own
 * pixels where the source's opening landed (`face`, the new face over `region`, in place): its lips
 * there moved (L*a*b*) from their mean to the new lips' (the more chromatic half of each). Returns
 * whether anything changed.
 */
export function showTargetLips(
  target: RgbImage,
  targetLm: readonly Point[],
  w: MouthWarp,
  region: Region,
  face: Float32Array,
): boolean {
  // Only where placeSource closed the mouth (closesOnTarget): the destination's mouth is the target's.
  for (let i = 48; i < 68; i++)
    if (w.dstPts[i]!.x !== targetLm[i]!.x || w.dstPts[i]!.y !== targetLm[i]!.y) return false;
  const opening = warpedOpening(w, region, faceSize(targetLm));
  if (!opening) return false;
  const n = region.width * region.height;
  const rgb = floats(n * 3);
  for (let y = 0; y < region.height; y++) {
    const row = ((region.top + y) * target.width + region.left) * 3;
    for (let i = 0; i < region.width * 3; i++) rgb[y * region.width * 3 + i] = target.data[row + i]!;
  }
  const lab = rgbToLab(rgb);
  const newLips = rasterizePolygon(w.dstPts.slice(48, 60), region);
  const oldLips = rasterizePolygon(targetLm.slice(48, 60), region);
  const to = lipMean(rgbToLab(face), newLips);
  const from = lipMean(lab, oldLips);
  if (to && from) {
    for (let i = 0; i < n; i++) if (oldLips[i]) for (let c = 0; c < 3; c++) lab[i * 3 + c]! += to[c]! - from[c]!;
  }
  const shown = labToRgb(lab);
  for (let i = 0; i < n * 3; i++) {
    const m = opening[(i / 3) | 0]!;
    if (m > 0) face[i] = face[i]! * (1 - m) + Math.min(255, Math.max(0, shown[i]!)) * m;
  }
  return true;
}

/**
 * Whether a swap onto `targetLm` closes the source's mouth: the target's is closed and the source
 * shows an opening. Then the destination's mouth is the target's own (its expression: the source's
 * lips onto its lip bands; a smile's outline taken from the source drew a grin around the target's
 * closed lips), and showTargetLips covers where the source's opening lands.
 */
export function closesOnTarget(src: RgbImage, srcLm: readonly Point[], targetLm: readonly Point[]): boolean {
  return mouthGap(targetLm, faceSize(targetLm)) < OPEN_GAP && sourceOpening(src, srcLm.slice(0, 68)) !== undefined;
}
