/**
 * One face swap on decoded images: landmark geometry, piecewise-affine warp, mask, colour transfer,
 * blend. Pure computation apart from an optional sharp resize of the source.
 */
import { cloneCorrection, composite } from './blend.js';
import { channelStats, labToRgb, regionLab, regionRgb, rgbToLab, type ColorStats } from './color.js';
export type { ColorStats } from './color.js';
import { boundingRegion, convexHull, faceSize, type Region } from './geometry.js';
import { resizeRegion } from './image.js';
import {
  dilate,
  distanceInside,
  featherAlpha,
  fillFromSurroundings,
  fillPolygon,
  polygonRows,
  rasterizePolygon,
} from './mask.js';
import type { BlendMode } from './options.js';
import { laplacianVariance, matchDetail } from './detail.js';
import { keepTargetGrey } from './grey.js';
import { removeRedEye } from './redeye.js';
import { mouthGap, OPEN_GAP } from './mouth.js';
import { loweredLip, mouthHole } from './opening.js';
import { closesOnTarget, showTargetLips } from './source-mouth.js';
import { mirrorFace, mirrorLandmarks, prefersMirror } from './mirror.js';
import { droppedJaw, FAR_TURN, liquifyOutline, outlineRing, pinnedAtFlat, reshapedJaw } from './outline.js';
import { guardedJaw, othersOf } from './guard.js';
import { occlusionMask } from './occlusion.js';
import { fitSkinModel, nonSkinMask, softenMask } from './skin.js';
import { matchColour } from './recolor.js';
import type { Point, RgbImage } from './types.js';
import { opaqueExtent, upsampleFace, type Rendered } from './upsample.js';
import { triangulate, warpPiecewiseAffine } from './warp.js';
import { bytes, copyOf, floats, withScratch } from './scratch.js';
import { EYE_ZONES, FEATURES } from './zones.js';

export interface SwapOptions {
  blend: BlendMode;
  colorCorrection: boolean;
  /**
   * Skin statistics to use for the global colour transfer instead of this image's own (video: a
   * running average over earlier frames, so the face's colour does not flicker from frame to frame).
   */
  colorStats?: ColorStats | undefined;
  /** Keep what is in front of the target face (default true). */
  occlusion?: boolean | undefined;
  /**
   * Largest face size (px, see faceSize) the swap is computed at. A larger target face is swapped on
   * a copy of its surroundings shrunk to this size, and the result is upsampled and sharpened back
   * to the photo's detail: the cost then stays that of a face this size. Default: the source face's
   * own size, but at least MIN_WORK_SIZE (a smaller source has no more detail to give).
   */
  workSize?: number | undefined;
  /**
   * Whether the source may be mirrored for a target turned the other way (default true). Video sets
   * false: a head turning across the threshold would flip the face from one frame to the next.
   */
  mirror?: boolean | undefined;
  /** A plane of the target's size that receives the alpha each pixel was written with (level.ts pastes by it). */
  alphaOut?: Float32Array | undefined;
  /**
   * The picture's faces (convex polygons, target pixels: detector boxes, landmark hulls) the outline
   * move keeps out of (guard.ts; the target's own, holding its nose tip, is skipped). The swap adds
   * its face's new outline, so a later swap of the same picture keeps off this face too.
   */
  keepOut?: Point[][] | undefined;
}

/**
 * Geometry and colour knobs, as fractions of the face size (square root of the landmark hull's area).
 * Chosen by measuring face-descriptor identity transfer and by eye on the face-api sample photos.
 */
export interface SwapTuning {
  /** Blend mask starts this far inside the face outline... */
  erode: number;
  /** ...and ramps from 0 to 1 over this distance. */
  feather: number;
  /**
   * Scale (of the face size) of the local chroma correction: blur(target) − blur(source) over skin
   * only, so the colour follows the target closely without taking the shape of its lips or lids.
   */
  sigmaAB: number;
  /** Resampling of the source in the warp: Catmull-Rom keeps the detail that bilinear softens. */
  kernel: 'bilinear' | 'bicubic';
  /**
   * 0: the source's eyes, nose and mouth are warped exactly onto the target's; 1: they keep the
   * source's own proportions (similarity-aligned to the target), which carries much of the identity.
   * The jaw line always stays the target's, since that is where the blend happens.
   */
  shape: number;
  /** How far above the brows the replaced area reaches, so the target's brows are covered too. */
  forehead: number;
  /** Share of `shape` the brows move by (they sit next to the fixed forehead points). */
  brows: number;
  /**
   * Share of the way the target's lower jaw and cheeks move towards the source's outline shape (aligned
   * as its features are), the photo around them stretched along (outline.ts); 0: the outline stays.
   */
  jaw: number;
  /** The far cheek of a turned target moves outwards by 1 - jawTurn * |noseAcross - 0.5| of its share (outline.ts). */
  jawTurn: number;
  /** Share of how much wider an open-mouthed target's mouth is open than the source's its jaw goal is lowered by (outline.ts). */
  jawDrop: number;
  /** Share of `shape` an open mouth's outer lip line moves by (its inner lip line stays the target's). */
  openLips: number;
  /** The source is mirrored when turned the other way from a target turned at least this much (mirror.ts; Infinity: never). */
  mirror: number;
  /** Stages left out (bench/face-swap-ablation.ts measures what each costs the identity). */
  skip?: readonly SwapStage[] | undefined;
}

/** Stages of a render that can be left out for measurement (colour, Poisson, occlusion: see SwapOptions). */
export type SwapStage = 'redeye' | 'hairFill' | 'detail' | 'mouthHole' | 'sourceMouth';

/**
 * Round 3 (contact sheet, 24 faces, with the red-eye and hair fill fixes): forehead 0.1 -> 0.2 and
 * sigmaAB 0.025 -> 0.1 (more of the source's own brows, forehead and skin colour). A firmer edge
 * (erode 0.01, feather 0.03) narrowed the open-mouth test's smile below 0.6 of its gap, so the edge
 * stays as it was; shape 1.25 (features beyond the source's proportions) did not help.
 * Round 3's identity pass (bench/face-swap-ablation.ts, median over the sheet's 24 faces; each step
 * on top of the last): the source's brows kept out of its hair fill 0.517 -> 0.482, brows moving
 * fully with the source's proportions (0.5 before) -> 0.454, the source mirrored for targets turned
 * the other way -> 0.431, forehead 0.25 -> 0.428, mirrored only for targets turned 0.12 or more
 * (landmarks nearer the target's) and the brow test made strand-proof -> 0.430. The outline moved
 * with the photo around it (jaw 1, outline.ts; the far cheek of a turned target outwards only
 * 1 - 3 x turn, an open mouth's jaw dropped by half its extra opening): read upright, median
 * 0.407 -> 0.403, worst 0.529 -> 0.491, landmarks 0.068 -> 0.074; then forehead 0.3 -> 0.395,
 * landmarks 0.075 (docs/face-swap.md). An open mouth's outer lips half-way to the source's (openLips
 * 0.5, with the target's make-up lines no longer kept over the new eyes): read upright, median
 * 0.401 -> 0.398, sample5 face 3 0.467 -> 0.448, the open-mouth test's smile 0.84 of its gap (all
 * of the way, openLips 1, closed it to 0.33).
 */
export const DEFAULT_TUNING: Readonly<SwapTuning> = {
  erode: 0.02,
  feather: 0.06,
  sigmaAB: 0.1,
  kernel: 'bicubic',
  shape: 1,
  forehead: 0.3,
  brows: 1,
  jaw: 1,
  jawTurn: FAR_TURN,
  jawDrop: 0.5,
  openLips: 0.5,
  mirror: 0.12,
};

/** Shrink the source first when its face is this much larger than the target face. */
const MAX_DOWNSAMPLE = 1.25;
/** Extra folded warp area (fraction of the face) tolerated to keep the source's proportions. */
const MAX_EXTRA_FOLDED = 0.01;
/** Margin around eyes, brows and mouth left out of the skin statistics. */
const FEATURE_MARGIN = 0.04;
/** Share of the target face's Laplacian variance the new face is sharpened up to. */
const DETAIL_TARGET = 0.9;

/** Jaw line 0-16, then (after extendForehead) 68-77 above the brows: the outline of the replaced area. */
const OUTLINE = [...Array.from({ length: 17 }, (_, i) => i), ...Array.from({ length: 10 }, (_, i) => 68 + i)];
/** First mouth landmark (48-59 outer lip line, 60-67 inner). */
const MOUTH_FROM = 48;
const INNER_LIP = 60;
/** Points used to fit the similarity alignment: brows, nose, eyes, mouth. */
const INNER = Array.from({ length: 68 - 17 }, (_, i) => i + 17);

/** Lift of each brow point (17-26), relative: the outer ends stay low, where hair often covers the temples. */
const FOREHEAD_TAPER = [0.6, 0.8, 0.9, 1, 1, 1, 1, 0.9, 0.8, 0.6];

/**
 * Appends 10 points above the brows (17-26), moved along the face's "up" direction (chin → nose
 * bridge), so the replaced area includes the brows and the blend edge lies on forehead skin.
 */
export function extendForehead(lm: readonly Point[], lift: number): Point[] {
  const chin = lm[8]!;
  const bridge = lm[27]!;
  const len = Math.hypot(bridge.x - chin.x, bridge.y - chin.y) || 1;
  const ux = (bridge.x - chin.x) / len;
  const uy = (bridge.y - chin.y) / len;
  const d = lift * faceSize(lm);
  const above = lm.slice(17, 27).map((p, i) => {
    const k = d * FOREHEAD_TAPER[i]!;
    return { x: p.x + ux * k, y: p.y + uy * k };
  });
  return [...lm, ...above];
}

/**
 * Source landmarks mapped onto the target by the similarity transform (rotation, uniform scale,
 * translation) that best fits the `fit` points in the least-squares sense (Procrustes, with
 * complex numbers: the factor a = Σ d·conj(s) / Σ |s|² over centred points is rotation × scale).
 */
export function alignSimilarity(src: readonly Point[], dst: readonly Point[], fit: readonly number[]): Point[] {
  let sx = 0;
  let sy = 0;
  let dx = 0;
  let dy = 0;
  for (const i of fit) {
    sx += src[i]!.x;
    sy += src[i]!.y;
    dx += dst[i]!.x;
    dy += dst[i]!.y;
  }
  sx /= fit.length;
  sy /= fit.length;
  dx /= fit.length;
  dy /= fit.length;
  let re = 0;
  let im = 0;
  let norm = 0;
  for (const i of fit) {
    const ax = src[i]!.x - sx;
    const ay = src[i]!.y - sy;
    const bx = dst[i]!.x - dx;
    const by = dst[i]!.y - dy;
    re += bx * ax + by * ay;
    im += by * ax - bx * ay;
    norm += ax * ax + ay * ay;
  }
  const ar = norm > 0 ? re / norm : 1;
  const ai = norm > 0 ? im / norm : 0;
  return src.map((p) => {
    const x = p.x - sx;
    const y = p.y - sy;
    return { x: ar * x - ai * y + dx, y: ai * x + ar * y + dy };
  });
}

/**
 * Where the source's landmarks go in the target: jaw and forehead points stay on the target's outline
 * (moved beforehand by reshapeTarget, if at all); brows, eyes, nose and mouth move `shape` of the
 * way to the source's own (aligned) proportions, the brows `brows` of that (they sit next to the fixed forehead points), an open
 * mouth's outer lips `openLips` of it and its inner lips not at all.
 */
function destinationPoints(srcLm: readonly Point[], targetLm: readonly Point[], tuning: SwapTuning): Point[] {
  const aligned = alignSimilarity(srcLm, targetLm, INNER);
  const open = mouthGap(targetLm, faceSize(targetLm)) >= OPEN_GAP;
  const dst = targetLm.map((p, i) => {
    // Jaw: the blend's edge. An open mouth: the target's expression (the source's lips are warped
    // onto the target's lips around its teeth), so no second, closed mouth appears beside it. A
    // closed one keeps the source's proportions, which carry some of its identity.
    const part =
      i < 17 ? 0 : i < 27 ? tuning.brows : open && i >= MOUTH_FROM ? (i < INNER_LIP ? tuning.openLips : 0) : 1;
    const k = tuning.shape * part;
    if (k === 0) return p;
    const a = aligned[i]!;
    return { x: p.x + k * (a.x - p.x), y: p.y + k * (a.y - p.y) };
  });
  return [...dst, ...extendForehead(targetLm, tuning.forehead).slice(68)];
}

/** Convex polygon grown by `margin` (hull of each vertex pushed out in 8 directions: a Minkowski sum with an octagon). */
function grow(poly: readonly Point[], margin: number): Point[] {
  const pts: Point[] = [];
  for (const p of poly) {
    for (let k = 0; k < 8; k++) {
      const a = (k * Math.PI) / 4;
      pts.push({ x: p.x + margin * Math.cos(a), y: p.y + margin * Math.sin(a) });
    }
  }
  return convexHull(pts);
}

/**
 * Area of the destination triangles whose orientation differs between the two point sets (folds in
 * the warp: mirrored patches), as a fraction of the whole triangulated area. Slivers between nearly
 * collinear points (the jaw, a closed mouth) fold all the time and harmlessly; large folds do not.
 */
export function foldedFraction(src: readonly Point[], dst: readonly Point[], triangles: Uint32Array): number {
  const signed = (p: readonly Point[], a: number, b: number, c: number) =>
    (p[b]!.x - p[a]!.x) * (p[c]!.y - p[a]!.y) - (p[c]!.x - p[a]!.x) * (p[b]!.y - p[a]!.y);
  let folded = 0;
  let total = 0;
  for (let t = 0; t < triangles.length; t += 3) {
    const a = triangles[t]!;
    const b = triangles[t + 1]!;
    const c = triangles[t + 2]!;
    const d = signed(dst, a, b, c);
    total += Math.abs(d);
    if (signed(src, a, b, c) * d < 0) folded += Math.abs(d);
  }
  return total > 0 ? folded / total : 0;
}

/** Feature zones (1-5: brows, eyes, mouth) of one landmark set, grown by `margin`, region-sized. */
function featureZones(lm: readonly Point[], region: Region, margin: number): Uint8Array {
  const zones = bytes(region.width * region.height);
  FEATURES.forEach(([from, to], k) => fillPolygon(zones, grow(lm.slice(from, to), margin), region, k + 1));
  return zones;
}

/** Smallest default work size (px): below it, masks and colour fits get coarse. */
export const MIN_WORK_SIZE = 160;
/** A face this much larger than the work size is swapped at the work size (smaller steps are not worth a resize). */
const WORK_SLACK = 1.15;
/** Room around the target's landmarks taken along when the face is swapped at a smaller scale. */
const WORK_MARGIN = 0.05;

/**
 * Replaces the face at `targetLm` (68 landmarks) in `target`, in place, with the face at `srcLm` in
 * `source`. Returns the skin statistics measured (for video's running average), if colour-corrected.
 */
export async function swapFace(
  target: RgbImage,
  targetLm: readonly Point[],
  source: RgbImage,
  srcLm: readonly Point[],
  opts: SwapOptions,
  tuning: SwapTuning = DEFAULT_TUNING,
): Promise<ColorStats | undefined> {
  // In a scratch scope: the outline move's per-pixel planes are garbage once it has written the photo.
  if (tuning.jaw > 0) targetLm = withScratch(() => reshapeTarget(target, targetLm, srcLm, opts, tuning));
  // The source's lower lip onto the target's, below any lower teeth its landmarks draw it over.
  targetLm = withScratch(() => loweredLip(target, targetLm));
  const size = faceSize(targetLm);
  const work = opts.workSize ?? Math.max(MIN_WORK_SIZE, faceSize(srcLm));
  if (size <= work * WORK_SLACK) {
    const placed = await placeSource(target, targetLm, source, srcLm, geometryTuning(opts, tuning));
    return withScratch(() => {
      const r = renderFace(target, targetLm, placed, opts, tuning, true);
      if (r) writeFace(target, r.region, r.face, r.alpha, opts.alphaOut);
      return r?.stats;
    });
  }
  // Swap on a shrunk copy of the face's surroundings, then bring the face back at full size.
  const k = work / size;
  const R = boundingRegion(extendForehead(targetLm, tuning.forehead), WORK_MARGIN * size, target.width, target.height);
  const sw = Math.max(4, Math.round(R.width * k));
  const sh = Math.max(4, Math.round(R.height * k));
  const small = await resizeRegion(target, R, sw, sh);
  const kx = R.width / sw;
  const ky = R.height / sh;
  const lm = targetLm.map((p) => ({ x: (p.x - R.left) / kx, y: (p.y - R.top) / ky }));
  const placed = await placeSource(small, lm, source, srcLm, geometryTuning(opts, tuning));
  return withScratch(() => {
    const r = renderFace(small, lm, placed, opts, tuning, false);
    if (!r) return undefined;
    // Full resolution only where the face has any alpha (R also holds the margin around it).
    const S = opaqueExtent(r, R, kx, ky);
    if (!S) return r.stats;
    const { face, alpha } = upsampleFace(r, R, kx, ky, S);
    if (!tuning.skip?.includes('detail')) sharpenToMatch(target, S, face, alpha);
    writeFace(target, S, face, alpha, opts.alphaOut);
    return r.stats;
  });
}

/** The target's outline moved towards the source's (`tuning.jaw`), the photo with it; returns its new landmarks. */
function reshapeTarget(
  target: RgbImage,
  targetLm: readonly Point[],
  srcLm: readonly Point[],
  opts: SwapOptions,
  tuning: SwapTuning,
): Point[] {
  const mirrored = prefersMirror(srcLm, targetLm, geometryTuning(opts, tuning).mirror);
  const aligned = alignSimilarity(mirrored ? mirrorLandmarks(srcLm) : srcLm, targetLm, INNER);
  const open = mouthGap(targetLm, faceSize(targetLm)) >= OPEN_GAP;
  const goal = open && tuning.jawDrop > 0 ? droppedJaw(aligned, targetLm, tuning.jawDrop) : aligned;
  let moved = pinnedAtFlat(target, targetLm, reshapedJaw(goal, targetLm, tuning.jaw, tuning.jawTurn));
  if (opts.keepOut) {
    const ring = outlineRing(targetLm, target.width, target.height);
    moved = guardedJaw(targetLm, moved, ring, othersOf(opts.keepOut, targetLm));
    opts.keepOut.push(convexHull(extendForehead(moved, tuning.forehead)));
  }
  liquifyOutline(target, targetLm, moved, opts.alphaOut);
  return moved;
}

/** The tuning the geometry uses: without mirroring when the caller rules it out (video). */
function geometryTuning(opts: SwapOptions, tuning: SwapTuning): SwapTuning {
  return opts.mirror === false ? { ...tuning, mirror: Infinity } : tuning;
}

/** Composites the face into `target` and, if asked, records the alpha it was written with. */
function writeFace(target: RgbImage, region: Region, face: Float32Array, alpha: Float32Array, out?: Float32Array) {
  composite(target, region, face, alpha);
  if (!out) return;
  for (let y = 0; y < region.height; y++) {
    const row = (region.top + y) * target.width + region.left;
    for (let x = 0; x < region.width; x++) out[row + x] = Math.max(out[row + x]!, alpha[y * region.width + x]!);
  }
}

/**
 * As crisp as the photo: compare the inner face (alpha 1) of both, sharpen the new face (where `use`
 * is set, default where alpha > 0) to match.
 */
export function sharpenToMatch(
  target: RgbImage,
  region: Region,
  face: Float32Array,
  alpha: Float32Array,
  use?: Uint8Array,
): void {
  const n = region.width * region.height;
  const core = bytes(n);
  for (let i = 0; i < n; i++) core[i] = alpha[i]! >= 1 ? 1 : 0;
  if (!use) {
    use = bytes(n);
    for (let i = 0; i < n; i++) use[i] = alpha[i]! > 0 ? 1 : 0;
  }
  const want =
    DETAIL_TARGET *
    laplacianVariance(
      target.data,
      region.width,
      region.height,
      core,
      target.width,
      region.top * target.width + region.left,
    );
  matchDetail(face, region.width, region.height, use, core, want);
}

/** Where the source's landmarks go in the target, its triangles, and the source at about the target's scale. */
interface Placement {
  src: RgbImage;
  srcPts: Point[];
  dstPts: Point[];
  triangles: Uint32Array;
}

/**
 * The geometry of a swap onto the face at `targetLm`, and the source shrunk when it is much larger
 * (the one step that awaits, so it runs before the synchronous, scratch-allocating render).
 */
async function placeSource(
  target: RgbImage,
  targetLm: readonly Point[],
  source: RgbImage,
  srcLm: readonly Point[],
  tuning: SwapTuning,
): Promise<Placement> {
  const size = faceSize(targetLm);
  // Turned the other way from the target: the source mirrored shows the side the target shows.
  if (prefersMirror(srcLm, targetLm, tuning.mirror)) ({ image: source, lm: srcLm } = mirrorFace(source, srcLm));
  let srcPts = extendForehead(srcLm, tuning.forehead);
  // A smiling source onto a closed mouth: the target's mouth is the destination's (source-mouth.ts).
  const closing = !tuning.skip?.includes('sourceMouth') && closesOnTarget(target, targetLm, source, srcLm);
  // Keep as much of the source's proportions as the geometry allows: a source face much longer or
  // wider than the target's could push its features across the fixed outline and fold triangles
  // over (mirrored patches). Some folding comes from pose differences whatever `shape` is, so
  // `shape` is halved only while it folds noticeably more of the face than shape 0 would.
  const at = (shape: number) => {
    const dst = destinationPoints(srcLm, targetLm, { ...tuning, shape });
    if (closing) dst.splice(48, 20, ...targetLm.slice(48, 68));
    const tris = triangulate(dst);
    return { dst, tris, folded: foldedFraction(srcPts, dst, tris) };
  };
  let shape = tuning.shape;
  let geo = at(shape);
  if (shape > 0 && geo.folded > MAX_EXTRA_FOLDED) {
    const baseline = at(0).folded;
    while (shape > 0.1 && geo.folded > baseline + MAX_EXTRA_FOLDED) {
      shape /= 2;
      geo = at(shape);
    }
  }
  let src = source;
  // Bilinear sampling of a much larger face aliases (jaggy hair lines, sparkling skin): shrink the
  // source face to about the target's scale with an area-averaging resize first.
  const ratio = faceSize(srcLm) / size;
  if (ratio > MAX_DOWNSAMPLE) {
    const r = boundingRegion(srcPts, 0.1 * faceSize(srcLm), source.width, source.height);
    const w = Math.max(2, Math.round(r.width / ratio));
    const h = Math.max(2, Math.round(r.height / ratio));
    src = await resizeRegion(source, r, w, h);
    const kx = r.width / w;
    const ky = r.height / h;
    srcPts = srcPts.map((p) => ({ x: (p.x - r.left) / kx, y: (p.y - r.top) / ky }));
  }
  return { src, srcPts, dstPts: geo.dst, triangles: geo.tris };
}

/** What the stages of one render share: its region, where the warp covered it, the face's scale. */
interface Canvas {
  region: Region;
  covered: Uint8Array;
  /** Face size (px, see faceSize) and the margin around the feature zones. */
  size: number;
  margin: number;
}

/**
 * One face's planes over the render region: CIELAB colour, feature zones, what its skin model calls
 * non-skin (`modelled`: whether a skin model could be fitted at all); `lm`, its landmarks there.
 */
interface FacePlanes {
  lm: readonly Point[];
  modelled: boolean;
  lab: Float32Array;
  zones: Uint8Array;
  nonSkin: Uint8Array;
  /** The lips (1) and their opening (2) (the source's only: its colour step needs them). */
  lips?: Uint8Array | undefined;
}

/**
 * A face's planes over the canvas from its colour: its feature zones (`lm`'s, grown by the margin)
 * and what its skin model, fitted away from the outline (alpha > 0.5) and the features, calls
 * non-skin inside the outline.
 */
function facePlanes(
  lab: Float32Array,
  lm: readonly Point[],
  c: Canvas,
  o: { inside: Uint8Array; alpha: Float32Array },
): FacePlanes {
  const n = c.region.width * c.region.height;
  const zones = featureZones(lm, c.region, c.margin);
  const sample = bytes(n);
  for (let i = 0; i < n; i++) sample[i] = o.alpha[i]! > 0.5 && !zones[i] ? 1 : 0;
  const skin = fitSkinModel(lab, sample);
  return { lm, lab, zones, nonSkin: skin ? nonSkinMask(lab, o.inside, skin) : bytes(n), modelled: !!skin };
}

/** The lips of a landmark set (1: inside the outer lip line 48-59) and their opening (2: inside the inner one, 60-67). */
function lipsOf(lm: readonly Point[], region: Region): Uint8Array {
  const lips = rasterizePolygon(lm.slice(MOUTH_FROM, INNER_LIP), region);
  fillPolygon(lips, lm.slice(INNER_LIP, 68), region, 2);
  return lips;
}

/** The replaced area (inside the outline) and each pixel's distance from its edge. */
interface Outline {
  inside: Uint8Array;
  dist: Float32Array;
}

/** What covers the face `f` (hair, a hand, a bar, a shoulder), by that face's own skin model. */
function occludersOf(c: Canvas, o: Outline, f: FacePlanes, anywhere = false): Uint8Array {
  const { width: w, height: h } = c.region;
  // The outline, where anything in front of a face enters it.
  const edge = bytes(w * h);
  for (let i = 0; i < w * h; i++) if (o.inside[i] && o.dist[i]! <= 2) edge[i] = 1;
  const innerHull = convexHull(f.lm.slice(17, 68));
  const inner = rasterizePolygon(grow(innerHull, 2 * c.margin), c.region);
  const innerCore = rasterizePolygon(innerHull, c.region);
  const planes = { width: w, height: h, lab: f.lab, nonSkin: f.nonSkin, edge, zoneOf: f.zones, inner, innerCore };
  return occlusionMask(
    { ...planes, size: c.size, eyeZones: EYE_ZONES, inside: o.inside, covered: c.covered },
    anywhere,
  );
}

/**
 * The source's own hair over its face is not its face: filled smoothly (src.lab, in place) from the
 * skin around it, so a blonde strand at the source's temple does not land on the target's brow.
 * Returns whether anything was filled.
 */
function fillSourceHair(c: Canvas, o: Outline, src: FacePlanes): boolean {
  if (!src.modelled) return false;
  const { width: w, height: h } = c.region;
  // Grown by 2 px: its anti-aliased edge, half hair and half skin, must go too.
  const hair = dilate(dilate(occludersOf(c, o, src, true), w, h), w, h);
  keepBrows(c, o, src, hair);
  keepEyes(c, src, hair);
  if (!hair.includes(1)) return false;
  // From the skin around it only: not from the rest of the hair, nor from beyond the outline
  // (where nothing was classified).
  const skin = bytes(w * h);
  for (let i = 0; i < w * h; i++) skin[i] = o.inside[i]! & (src.nonSkin[i]! ^ 1);
  fillFromSurroundings(src.lab, hair, skin, w, h);
  for (let i = 0; i < w * h; i++) if (hair[i]) src.nonSkin[i] = 0;
  return true;
}

/**
 * The swap's tuning for a source already through withoutSourceHair (the image job's, each video
 * frame's): its hair is not looked for again in each swap.
 */
export const PREPARED_TUNING: Readonly<SwapTuning> = { ...DEFAULT_TUNING, skip: ['hairFill'] };

/**
 * `source` with its own hair over its face filled from the skin around it (fillSourceHair, done in
 * the source's own geometry instead of the warped one), or `source` itself when there is none. For
 * a caller that swaps one source into many targets (video, frame after frame): each swap may then
 * skip 'hairFill', which would find the same hair again every time (~8 % of a video frame's swap).
 */
export function withoutSourceHair(source: RgbImage, srcLm: readonly Point[], tuning = DEFAULT_TUNING): RgbImage {
  const pts = extendForehead(srcLm, tuning.forehead);
  const size = faceSize(srcLm);
  const region = boundingRegion(pts, 2, source.width, source.height);
  const { width: w, height: h } = region;
  return withScratch(() => {
    const n = w * h;
    const covered = bytes(n).fill(1);
    const inside = rasterizePolygon(convexHull(OUTLINE.map((i) => pts[i]!)), region);
    const dist = distanceInside(inside, w, h);
    const alpha = featherAlpha(dist, tuning.erode * size, tuning.feather * size);
    const lab = regionLab(source, region, covered);
    const before = copyOf(lab);
    const canvas: Canvas = { region, covered, size, margin: FEATURE_MARGIN * size };
    if (!fillSourceHair(canvas, { inside, dist }, facePlanes(lab, pts, canvas, { inside, alpha }))) return source;
    // Back to RGB only where the fill changed the colour.
    const changed = bytes(n);
    for (let i = 0, q = 0; i < n; i++, q += 3) {
      changed[i] = +(lab[q] !== before[q] || lab[q + 1] !== before[q + 1] || lab[q + 2] !== before[q + 2]);
    }
    const filled = labToRgb(lab, changed);
    const out: RgbImage = { ...source, data: source.data.slice() };
    for (let i = 0; i < n; i++) {
      if (!changed[i]) continue;
      const o = ((region.top + Math.floor(i / w)) * source.width + region.left + (i % w)) * 3;
      for (let c = 0; c < 3; c++) out.data[o + c] = Math.min(255, Math.max(0, Math.round(filled[i * 3 + c]!)));
    }
    return out;
  });
}

/** Band around each brow's landmarks (of the face size) where the brow's own colour is kept... */
const BROW_BAND = 0.05;
/** ...within this colour distance (ΔE) of the brow's inner end, which hair seldom covers. */
const BROW_DELTA_E = 25;
/** A brow's chroma is at most this far (a*b*) from the skin's mean. */
const BROW_FROM_SKIN_AB = 25;
/**
 * Share of each brow's length, from its inner end, kept: its outer end is where the source's temple
 * hair meets it (kept to the end, a lock there came out as a black mark beside the target's brow on
 * four faces of the contact sheet; at 0.7 none, and the sheet's median identity the same).
 */
const BROW_KEPT_LENGTH = 0.7;
/** Each brow's landmarks, outer end first (17-21 image left, 26-22 image right). */
const BROWS = [
  [17, 18, 19, 20, 21],
  [26, 25, 24, 23, 22],
];

/**
 * A brow is not hair, even where it touches hair of its own colour at the temple (the sheet's source,
 * a brunette: her whole left brow was filled with skin, which cost the self-swap 0.12 of identity):
 * `hair` is cleared (in place) in a band around each brow, short of its outer end, wherever the
 * colour is the brow's own, measured at its inner end. A strand of another colour across a brow end
 * is still filled, and so is one lying over the brow's inner end (its hue is not near the skin's).
 */
function keepBrows(c: Canvas, o: Outline, src: FacePlanes, hair: Uint8Array): void {
  const band = BROW_BAND * c.size;
  const { width: w, height: h } = c.region;
  const weight = floats(w * h);
  for (let i = 0; i < w * h; i++) weight[i] = o.inside[i]! & (src.nonSkin[i]! ^ 1);
  const skin = channelStats(src.lab, weight).mean;
  let keep = bytes(w * h);
  for (const brow of BROWS) {
    const innerHull = grow(convexHull(brow.slice(3).map((i) => src.lm[i]!)), band);
    const inner = rasterizePolygon(innerHull, c.region);
    // Only the rows the polygon fills: the statistics skip every pixel of weight 0, in the same order.
    const span = rowSpan(innerHull, c.region);
    for (let i = span.from; i < span.to; i++) weight[i] = inner[i]! & src.nonSkin[i]!;
    const { mean } = channelStats(src.lab.subarray(3 * span.from, 3 * span.to), weight.subarray(span.from, span.to));
    // A brow's hue is near the skin's (brown, black, blonde): a blue strand over the brow is not one.
    if (
      !weight.subarray(span.from, span.to).includes(1) ||
      Math.hypot(mean[1] - skin[1], mean[2] - skin[2]) > BROW_FROM_SKIN_AB
    ) {
      continue;
    }
    const wholeHull = grow(convexHull(brow.map((i) => src.lm[i]!)), band);
    const whole = rasterizePolygon(wholeHull, c.region);
    // Not along its outer end (measured along the brow, from its inner end): that is temple hair.
    const from = src.lm[brow[4]!]!;
    const to = src.lm[brow[0]!]!;
    const ux = to.x - from.x;
    const uy = to.y - from.y;
    const beyond = (i: number) =>
      ((i % w) + c.region.left + 0.5 - from.x) * ux + (Math.floor(i / w) + c.region.top + 0.5 - from.y) * uy >
      BROW_KEPT_LENGTH * (ux * ux + uy * uy);
    const rows = rowSpan(wholeHull, c.region);
    for (let i = rows.from; i < rows.to; i++) {
      if (!whole[i] || !hair[i] || beyond(i)) continue;
      const q = i * 3;
      const d = Math.hypot(src.lab[q]! - mean[0], src.lab[q + 1]! - mean[1], src.lab[q + 2]! - mean[2]);
      if (d < BROW_DELTA_E) keep[i] = 1;
    }
  }
  // With its soft edge (as far as the hair mask was grown), which would otherwise be cut as a ring.
  keep = dilate(dilate(keep, w, h), w, h);
  for (let i = 0; i < w * h; i++) if (keep[i]) hair[i] = 0;
}

/** The pixel indices [from, to) of the region's rows that `poly` may cover (polygonRows). */
function rowSpan(poly: readonly Point[], region: Region): { from: number; to: number } {
  const { y0, y1 } = polygonRows(poly, region);
  return { from: y0 * region.width, to: Math.max(y0, y1 + 1) * region.width };
}

/**
 * Margin (of the face size) around each eye's opening (landmarks 36-41, 42-47) that the hair fill
 * leaves: its lash line, to the outer corner (at 0.03 the lashes there were cut to a wedge; the
 * contact sheet's source, whose temple hair the fill handles, swaps within 0.002 of identity of
 * the same without it).
 */
const EYE_KEPT_MARGIN = 0.05;

/**
 * An eye is not hair: `hair` is cleared (in place) over each eye's opening, grown a little for its
 * lash line. A source whose dark hair reaches an eye's outer corner (sample6's second face, hair over
 * her far cheek) had her lashes and iris taken for the hair they touch, in its colour; grown by the
 * fill's 2 px and with the small holes it encloses, the hair covered the whole eye, filled with skin.
 */
function keepEyes(c: Canvas, src: FacePlanes, hair: Uint8Array): void {
  for (const from of [36, 42]) {
    const eye = rasterizePolygon(grow(src.lm.slice(from, from + 6), EYE_KEPT_MARGIN * c.size), c.region);
    for (let i = 0; i < eye.length; i++) if (eye[i]) hair[i] = 0;
  }
}

/**
 * Whatever is in front of the target face (hair, a hand-held object, a shoulder) stays in front: cut
 * out of `alpha` (in place, softened). Returns the occluders' mask.
 */
function keepOccluders(c: Canvas, o: Outline, dst: FacePlanes, alpha: Float32Array): Uint8Array | undefined {
  if (!dst.modelled) return undefined;
  const { width: w, height: h } = c.region;
  const occluded = occludersOf(c, o, dst);
  const soft = softenMask(occluded, w, h);
  for (let i = 0; i < w * h; i++) alpha[i] = alpha[i]! * (1 - soft[i]!);
  return occluded;
}

/**
 * The new face for the face at `targetLm`, not yet written into `target`: warped, colour-matched,
 * Poisson-corrected, with the final alpha (occluders already cut out). `detail`: sharpen to the
 * photo's detail here (false when the caller upsamples it first). Its arrays are scratch (run it
 * inside withScratch and use them there).
 */
function renderFace(
  target: RgbImage,
  targetLm: readonly Point[],
  placed: Placement,
  opts: SwapOptions,
  tuning: SwapTuning,
  detail: boolean,
): Rendered | undefined {
  const size = faceSize(targetLm);
  const { src, srcPts, dstPts, triangles } = placed;
  const region = boundingRegion([...dstPts, ...targetLm], 2, target.width, target.height);
  if (region.width < 4 || region.height < 4) return undefined;
  const n = region.width * region.height;

  const { rgb: warped, covered } = warpPiecewiseAffine(src, srcPts, dstPts, triangles, region, tuning.kernel);
  const skip = (s: SwapStage) => tuning.skip?.includes(s) === true;
  if (!skip('redeye')) removeRedEye(warped, dstPts, region);

  const inside = rasterizePolygon(convexHull(OUTLINE.map((i) => dstPts[i]!)), region);
  for (let i = 0; i < n; i++) inside[i] = inside[i]! & covered[i]!;
  const dist = distanceInside(inside, region.width, region.height);
  const alpha = featherAlpha(dist, tuning.erode * size, tuning.feather * size);

  const dstRgb = regionRgb(target, region);
  const canvas: Canvas = { region, covered, size, margin: FEATURE_MARGIN * size };
  const srcLab = rgbToLab(warped, covered);
  const source = { ...facePlanes(srcLab, dstPts, canvas, { inside, alpha }), lips: lipsOf(dstPts, region) };
  const dest = facePlanes(regionLab(target, region, covered), targetLm, canvas, { inside, alpha });
  if (!skip('hairFill') && fillSourceHair(canvas, { inside, dist }, source) && !opts.colorCorrection) {
    warped.set(labToRgb(srcLab, covered));
  }
  const occluded = opts.occlusion !== false ? keepOccluders(canvas, { inside, dist }, dest, alpha) : undefined;

  let measured: ColorStats | undefined;
  if (opts.colorCorrection) {
    measured = matchColour(canvas, source, dest, { alpha, occluded }, opts.colorStats, tuning);
    warped.set(labToRgb(srcLab, covered));
  }

  keepTargetGrey(warped, dstRgb, inside);
  const face = warped;
  // Sharpened before the membrane is added: the membrane is smooth and changes no detail.
  if (detail && !skip('detail')) sharpenToMatch(target, region, face, alpha, covered);
  if (opts.blend === 'poisson') cloneCorrection(target, { region, rgb: face, covered, alpha, occluded, size });
  // Cut after the membrane, which must not take the teeth's colour as the face's boundary.
  // Its inner lip line, and the opening wherever the pixels show it wider than the landmarks draw it (opening.ts).
  const hole = skip('mouthHole') ? undefined : mouthHole(target, targetLm, region, size);
  if (hole) for (let i = 0; i < n; i++) alpha[i] = alpha[i]! * (1 - hole[i]!);
  // Open or closed, the target's own lips wherever the source's opening (its teeth) lands, and a
  // closed one's whole mouth (source-mouth.ts): the teeth shown are only ever the target's.
  if (!skip('sourceMouth')) showTargetLips(target, targetLm, placed, region, face);
  return { region, face, alpha, stats: measured };
}
