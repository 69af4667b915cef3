/**
 * Occlusion: non-skin pixels of a face that belong to something entering it from outside (hair, a
 * bar, a shoulder, glasses frames, a microphone). They are told apart from the face's own non-skin
 * parts (lips, eyes, brows, make-up) by connectivity: an occluder's connected non-skin component
 * reaches the face outline and covers skin outside the feature zones.
 */
import { dilate } from './mask.js';
import { browEndBand } from './brow-end.js';
import { hairlineHair } from './hairline.js';
import { bytes, ints } from './scratch.js';
import { BROW_ZONES, EYE_ZONES } from './zones.js';

/** Largest colour step (ΔE², between 4-neighbours) inside one non-skin region. */
const STEP_DELTA_E2 = 12 * 12;
/** Occluders smaller than this (fraction of the face size squared, outside the feature zones) are ignored. */
const MIN_OCCLUDER_AREA = 0.004;
/**
 * Holes in the source's hair up to this area (fraction of the face size squared) are hair too:
 * a pocket that size enclosed by a lock is its darker core (the lock's mean colour is lighter), or
 * skin that the fill makes smooth.
 */
const MAX_HOLE_AREA = 0.02;
/** An occluder is kept inside the inner face only when it covers this much of it. */
const INNER_COVER = 0.03;
/** ...or spans this much of the face size inside it. */
const INNER_SPAN = 0.5;
/** An occluder also hides a feature zone when it covers at least this much of the zone... */
const ZONE_COVER = 0.3;
/** ...and only its pixels there within this colour distance (ΔE) of the occluder's colour outside the zones. */
const ZONE_DELTA_E = 14;
/**
 * A zone still shows its feature when this share of it is non-skin in another colour than the
 * occluder's (an eye's white and iris, a lip's red): then what covers the rest of the zone is the
 * feature's make-up, not something in front of it. Made-up eyes of the contact sheet show 0.34-0.59,
 * plain eyes 0.16-0.23, brows 0-0.16, a bar over the mouth none.
 */
const ZONE_SHOWS = 0.3;
/**
 * ...and when the occluder's own colour spreads over this share of it: paint around the eye (0.30-0.45
 * on the sheet), not hair over an eye's outer corner and the lashes it touches (0.16-0.26).
 */
const ZONE_PAINTED = 0.28;
/**
 * An eye's zone painted in the occluder's colour over this share is hidden by it (a lock over the
 * whole eye, dark glasses); under it, the occluder's colour there is the eye's own dark: lashes,
 * liner, iris. A downcast or squinting eye shows too little white and iris to pass ZONE_SHOWS
 * (sample1 face 1's lowered eye 0.22, sample5 face 4's narrowed eyes 0.05 and 0.27), and kept in
 * front as the hair they touch, its lashes and iris stayed beside the new eye: a second eye.
 * Those paint 0.29-0.57 of the zone, hair over an eye's outer corner 0.16-0.26.
 */
const EYE_HIDDEN = 0.75;
/** How far (of the face size) around a feature's zone its make-up is looked for. */
const MAKE_UP_REACH = 0.04;
/**
 * Half-width (of the face size) of the neck that joins a mark to an occluder: a blob thicker than
 * this, joined to the outline only through thinner pixels (the shadowed strip along a jaw line), is
 * painted on the face, not in front of it (sample1 face 0's clown dot at the cheek's edge).
 */
const MARK_NECK = 0.02;
/** Such a blob is a mark up to this area (of the face size squared); larger ones stay occluders. */
const MAX_MARK_AREA = 0.015;
/**
 * Inside a brow's or an eye's zone an occluder is kept only within this distance (of the face size)
 * of its parts thicker than it (the pixels whose square of this half-width is all occluded): a lock
 * over an eye is thick, the liner, lashes and brow hairs joined to it are lines. sample6 face 1's
 * liner and the upper edge of a brow, joined to her hair at the temples, stayed around the new eyes
 * (identity 0.465; without them 0.419).
 */
const FEATURE_LOCK = 0.025;
/** 1 at the brows' and the eyes' zone numbers. */
const BROW_OR_EYE = Uint8Array.from({ length: 256 }, (_, z) => +[...BROW_ZONES, ...EYE_ZONES].includes(z));

/** One face's planes for the occluder test, all of the render region's size (`width` × `height`). */
export interface OcclusionPlanes {
  width: number;
  height: number;
  /** CIELAB, 3 per pixel. */
  lab: Float32Array;
  /** 1 where the face's skin model says non-skin. */
  nonSkin: Uint8Array;
  /** 1 at the face outline, where anything in front of the face enters it. */
  edge: Uint8Array;
  /** Each pixel's feature zone (0: none, 1..n: brows, eyes, mouth, grown by a margin). */
  zoneOf: Uint8Array;
  /** The inner face (brows to mouth, grown) and its core (the landmarks' hull). */
  inner: Uint8Array;
  innerCore: Uint8Array;
  /** Face size (px). */
  size: number;
  /** The zones (of zoneOf) that are eyes: their own dark parts join hair of that colour. */
  eyeZones?: readonly number[] | undefined;
  /**
   * 1 inside the face outline, and where the colour is known (the photo around a face in its own
   * geometry; a warped face has none beyond its outline): with them, `anywhere` also takes the hair
   * the skin model missed (hairline.ts).
   */
  inside?: Uint8Array | undefined;
  covered?: Uint8Array | undefined;
}

/** One connected non-skin component: its pixels (queue[0..count)) and what they touch. */
interface Component {
  count: number;
  touches: boolean;
  /** Pixels outside the zones (all of them when `anywhere`), and their mean colour. */
  outside: number;
  l: number;
  a: number;
  b: number;
}

/** A colour in CIELAB. */
interface Lab {
  l: number;
  a: number;
  b: number;
}

/**
 * The occluded pixels of a face: 1 where something in front of it must be kept. A component is an
 * occluder when it reaches the outline and covers enough area outside the zones; it enters the
 * inner face only when it covers a good part of its core or spans half the face there; inside a
 * zone it hides the zone only where it covers nearly all of it in its own colour (a bar across the
 * mouth), so a brow or an eye that merely touches hair at the temple is still replaced; over a
 * brow's outer end (browEndBand) it is kept in its own colour or darker. `anywhere`:
 * wherever such a component reaches, inside zones by colour only (for the source face, whose hair
 * over a brow end must not be carried into the target; a brow left a little short is the lesser harm).
 */
export function occlusionMask(p: OcclusionPlanes, anywhere = false): Uint8Array {
  const n = p.width * p.height;
  const label = ints(n).fill(-1);
  const queue = ints(n);
  const occluded = bytes(n);
  const zoneArea = new Map<number, number>();
  for (let i = 0; i < n; i++) if (p.zoneOf[i]) zoneArea.set(p.zoneOf[i]!, (zoneArea.get(p.zoneOf[i]!) ?? 0) + 1);
  let innerArea = 0;
  for (let i = 0; i < n; i++) innerArea += p.innerCore[i]!;
  const minArea = MIN_OCCLUDER_AREA * p.size * p.size;
  const rules: MarkRules = { zones: zoneArea, inner: innerArea, anywhere, temple: undefined };
  let comp = 0;
  for (let s = 0; s < n; s++) {
    if (!p.nonSkin[s] || label[s]! >= 0) continue;
    const c = floodComponent(p, s, comp++, label, queue, anywhere);
    if (!c.touches || c.outside < minArea) continue;
    if (!anywhere) rules.temple ??= browEndBand(p, BROW_ZONES, p.eyeZones ?? EYE_ZONES);
    markOccluder(p, c, queue, occluded, rules);
  }
  if (anywhere) {
    if (p.inside && p.covered) {
      const hair = hairlineHair({ ...p, inside: p.inside, covered: p.covered }, p.eyeZones ?? EYE_ZONES, BROW_ZONES);
      for (let i = 0; i < n; i++) occluded[i] = occluded[i]! | hair[i]!;
    }
    absorbNeighbours(p, occluded, queue);
    fillHoles(occluded, p.width, p.height, MAX_HOLE_AREA * p.size * p.size, queue);
  } else if (occluded.includes(1)) {
    dropMarks(p, occluded, queue);
    dropThinOnFeatures(p, occluded);
  }
  return occluded;
}

/**
 * Clears (in place) the marks painted on the target's skin that joined an occluder: each blob of the
 * occluded pixels thicker than MARK_NECK (its core), with the pixels within that distance of it,
 * that does not reach the outline and lies on skin outside the feature zones. A lock entering from
 * the outline is thick where it enters, so its blob reaches the outline; a painted dot joins the
 * hair only through the thin dark strip along a turned face's jaw, and was kept as hair.
 */
function dropMarks(p: OcclusionPlanes, occluded: Uint8Array, queue: Int32Array): void {
  const { width: w, height: h } = p;
  const r = MARK_NECK * p.size;
  // Steps (4-connected) beyond the core: every pixel within r of it (diagonals included) and the
  // neck that joins it to the rest, which kept would stay beside the new skin as a dark crescent.
  const steps = 2 * (Math.ceil(1.5 * r) + 1);
  const core = thickPixels(occluded, w, h, Math.round(r));
  if (!core.includes(1)) return;
  const blobs: Blobs = { core, seen: bytes(w * h), stamp: ints(w * h).fill(-1), depth: ints(w * h), next: 0 };
  const maxArea = MAX_MARK_AREA * p.size * p.size;
  for (let s = 0; s < w * h; s++) {
    if (!core[s] || blobs.seen[s]) continue;
    const tail = blobAround(p, occluded, queue, s, steps, blobs);
    if (tail > maxArea) continue;
    let mark = true;
    for (let k = 0; k < tail && mark; k++) mark = !p.edge[queue[k]!] && !p.zoneOf[queue[k]!];
    if (mark) for (let k = 0; k < tail; k++) occluded[queue[k]!] = 0;
  }
}

/**
 * Clears (in place) the occluded pixels in a brow's or an eye's zone farther than FEATURE_LOCK from
 * every thick part of the occluders (a morphological opening, there only): the make-up and hairs
 * of the feature itself, not what is in front of it.
 */
function dropThinOnFeatures(p: OcclusionPlanes, occluded: Uint8Array): void {
  const { width: w, height: h } = p;
  const onZone = (i: number) => occluded[i] && BROW_OR_EYE[p.zoneOf[i]!] === 1;
  let any = false;
  for (let i = 0; i < w * h && !any; i++) any = !!onZone(i);
  if (!any) return;
  const s = Math.max(1, Math.round(FEATURE_LOCK * p.size));
  const near = boxAny(thickPixels(occluded, w, h, s), w, h, s);
  for (let i = 0; i < w * h; i++) if (onZone(i) && !near[i]) occluded[i] = 0;
}

/** 1 where the square of half-width `s` around a pixel holds any of `mask` (its dilation). */
function boxAny(mask: Uint8Array, w: number, h: number, s: number): Uint8Array {
  const W = w + 1;
  const sat = summedArea(mask, w, h);
  const out = bytes(w * h);
  for (let y = 0; y < h; y++) {
    const y0 = Math.max(0, y - s);
    const y1 = Math.min(h, y + s + 1);
    for (let x = 0; x < w; x++) {
      const x0 = Math.max(0, x - s);
      const x1 = Math.min(w, x + s + 1);
      if (sat[y1 * W + x1]! - sat[y0 * W + x1]! - sat[y1 * W + x0]! + sat[y0 * W + x0]! > 0) out[y * w + x] = 1;
    }
  }
  return out;
}

/** Summed-area table of `mask` ((w + 1) × (h + 1), a zero row and column first). */
function summedArea(mask: Uint8Array, w: number, h: number): Int32Array {
  const W = w + 1;
  const sat = ints(W * (h + 1)).fill(0);
  for (let y = 0; y < h; y++) {
    let row = 0;
    for (let x = 0; x < w; x++) {
      row += mask[y * w + x]!;
      sat[(y + 1) * W + x + 1] = sat[y * W + x + 1]! + row;
    }
  }
  return sat;
}

/**
 * 1 where the square of half-width `s` around a pixel is all `mask` (a summed-area table): the
 * pixels deeper than `s` inside it, the mask's erosion.
 */
function thickPixels(mask: Uint8Array, w: number, h: number, s: number): Uint8Array {
  const W = w + 1;
  const sat = summedArea(mask, w, h);
  const out = bytes(w * h);
  const full = (2 * s + 1) * (2 * s + 1);
  for (let y = s; y < h - s; y++) {
    for (let x = s; x < w - s; x++) {
      if (!mask[y * w + x]) continue;
      const a = (y + s + 1) * W + x + s + 1;
      const b = (y - s) * W + x + s + 1;
      const c = (y + s + 1) * W + x - s;
      const d = (y - s) * W + x - s;
      if (sat[a]! - sat[b]! - sat[c]! + sat[d]! === full) out[y * w + x] = 1;
    }
  }
  return out;
}

/** dropMarks' state: the thick pixels (cores), those seen, which blob reached a pixel and how far. */
interface Blobs {
  core: Uint8Array;
  seen: Uint8Array;
  stamp: Int32Array;
  depth: Int32Array;
  next: number;
}

/**
 * The blob whose core (thick occluded pixels, `b.core`, 4-connected) holds `s`, and the occluded
 * pixels up to `steps` steps beyond that core, in queue[0..returned count).
 */
function blobAround(p: OcclusionPlanes, occluded: Uint8Array, queue: Int32Array, s: number, steps: number, b: Blobs) {
  const { width: w, height: h } = p;
  const blob = b.next++;
  let tail = 0;
  queue[tail++] = s;
  b.seen[s] = 1;
  b.stamp[s] = blob;
  b.depth[s] = 0;
  for (const core of [true, false]) {
    for (let head = 0; head < tail; head++) {
      const i = queue[head]!;
      if (!core && b.depth[i]! >= steps) continue;
      const x = i % w;
      const y = (i - x) / w;
      for (let k = 0; k < 4; k++) {
        const j = neighbour(i, x, y, k, w, h);
        if (j < 0 || !occluded[j] || b.stamp[j] === blob) continue;
        if (core && !b.core[j]) continue;
        if (core) b.seen[j] = 1;
        b.stamp[j] = blob;
        b.depth[j] = core ? 0 : b.depth[i]! + 1;
        queue[tail++] = j;
      }
    }
  }
  return tail;
}

/**
 * Closes small holes in the occluded pixels (in place): regions of fewer than `maxArea` pixels
 * enclosed by them. A lock's mid-dark strands are skin by a lenient lightness band, and its darkest
 * core inside a brow's zone is too far from the lock's colour to join it: left out, a dark target
 * took them to black, a speck beside the brow inside the filled hair.
 */
function fillHoles(occluded: Uint8Array, w: number, h: number, maxArea: number, queue: Int32Array): void {
  const seen = bytes(w * h);
  for (let s = 0; s < w * h; s++) {
    if (occluded[s] || seen[s]) continue;
    let tail = 0;
    let border = false;
    queue[tail++] = s;
    seen[s] = 1;
    for (let head = 0; head < tail; head++) {
      const i = queue[head]!;
      const x = i % w;
      const y = (i - x) / w;
      if (x === 0 || y === 0 || x === w - 1 || y === h - 1) border = true;
      for (let k = 0; k < 4; k++) {
        const j = neighbour(i, x, y, k, w, h);
        if (j < 0) continue;
        if (occluded[j] || seen[j]) continue;
        seen[j] = 1;
        queue[tail++] = j;
      }
    }
    if (border || tail > maxArea) continue;
    for (let k = 0; k < tail; k++) occluded[queue[k]!] = 1;
  }
}

/**
 * Grows the occluded pixels (in place) over every non-skin pixel connected to them outside the
 * feature zones, whatever its colour: the darkest strands inside a lock differ from its lighter,
 * skin-blended edge by more than one region's colour step, and left as small regions of their own
 * (too small to count) they were carried into the target as a dark speck beside the brow.
 */
function absorbNeighbours(p: OcclusionPlanes, occluded: Uint8Array, queue: Int32Array): void {
  const { width: w, height: h } = p;
  let tail = 0;
  for (let i = 0; i < occluded.length; i++) if (occluded[i]) queue[tail++] = i;
  for (let head = 0; head < tail; head++) {
    const i = queue[head]!;
    const x = i % w;
    const y = (i - x) / w;
    for (let k = 0; k < 4; k++) {
      const j = neighbour(i, x, y, k, w, h);
      if (j < 0) continue;
      if (occluded[j] || !p.nonSkin[j] || p.zoneOf[j]) continue;
      occluded[j] = 1;
      queue[tail++] = j;
    }
  }
}

/**
 * Flood fill (4-connected) of the component holding `s`: neighbours join when they are non-skin too
 * and of a similar colour (blue eye shadow touching dark hair at the temple stays a region of its
 * own). Its pixels end up in queue[0..count).
 */
function floodComponent(
  p: OcclusionPlanes,
  s: number,
  comp: number,
  label: Int32Array,
  queue: Int32Array,
  anywhere: boolean,
): Component {
  const { width: w, height: h, lab } = p;
  const c: Component = { count: 0, touches: false, outside: 0, l: 0, a: 0, b: 0 };
  let head = 0;
  let tail = 0;
  queue[tail++] = s;
  label[s] = comp;
  while (head < tail) {
    const i = queue[head++]!;
    // The outline next to a brow or an eye does not count: a brow reaching it is still a brow.
    if (p.edge[i] && (anywhere || !p.zoneOf[i])) c.touches = true;
    if (anywhere || !p.zoneOf[i]) {
      c.outside++;
      c.l += lab[i * 3]!;
      c.a += lab[i * 3 + 1]!;
      c.b += lab[i * 3 + 2]!;
    }
    const x = i % w;
    const y = (i - x) / w;
    for (let k = 0; k < 4; k++) {
      const j = neighbour(i, x, y, k, w, h);
      if (j < 0) continue;
      if (!p.nonSkin[j] || label[j]! >= 0) continue;
      const dl = lab[j * 3]! - lab[i * 3]!;
      const da = lab[j * 3 + 1]! - lab[i * 3 + 1]!;
      const db = lab[j * 3 + 2]! - lab[i * 3 + 2]!;
      if (dl * dl + da * da + db * db >= STEP_DELTA_E2) continue;
      label[j] = comp;
      queue[tail++] = j;
    }
  }
  c.count = tail;
  if (c.outside > 0) {
    c.l /= c.outside;
    c.a /= c.outside;
    c.b /= c.outside;
  }
  return c;
}

/** What markOccluder marks an occluder by. */
interface MarkRules {
  /** Each zone's pixel count, and the inner core's. */
  zones: Map<number, number>;
  inner: number;
  /** Wherever the component reaches, inside zones by colour only (occlusionMask's `anywhere`). */
  anywhere: boolean;
  /** The band over the brows' outer ends (browEndBand) where the lock is kept; none when `anywhere`. */
  temple: Uint8Array | undefined;
}

/**
 * Marks an occluding component's pixels in `occluded`: into the inner face (brows to mouth) only
 * when it really crosses it (a strand of hair merely touching a brow's end does not make the brow
 * an occluder); into a zone (unless `anywhere`) only when it covers much of it, and there by colour.
 */
function markOccluder(p: OcclusionPlanes, c: Component, queue: Int32Array, occluded: Uint8Array, r: MarkRules): void {
  const { anywhere, temple } = r;
  const cover = new Map<number, number>();
  let inInner = 0;
  for (let k = 0; k < c.count; k++) {
    const i = queue[k]!;
    const z = p.zoneOf[i]!;
    if (z) cover.set(z, (cover.get(z) ?? 0) + 1);
    inInner += p.innerCore[i]!;
  }
  // Inside the inner face and the zones only in the colour it has where it enters: dark eye
  // make-up touching dark hair at the temple joins the hair's region, but is not hair.
  const own = entryColour(p, c, queue) ?? c;
  const crosses = anywhere || inInner >= INNER_COVER * r.inner || coreSpan(p, c, queue) >= INNER_SPAN * p.size;
  const shown = anywhere ? [] : featuresShown(p, own, cover, r.zones);
  const onFeature = shown.length > 0 ? nearerFeature(p, c, queue, shown) : undefined;
  for (let k = 0; k < c.count; k++) {
    const i = queue[k]!;
    if (onFeature?.[i]) continue;
    // Crossing or not, it reaches over a brow's outer end (temple hair there), in its own colour or
    // darker (browEndBand); dropThinOnFeatures then keeps only the lock's thick part on the brow.
    // The README example's dark lock over a brow's end, dropped, took the source's window-lit
    // skin: a pale wedge in the hair.
    const z = p.zoneOf[i]!;
    if (temple?.[i] && lockColour(p, i, own)) {
      occluded[i] = 1;
      continue;
    }
    if (p.inner[i] && !crosses && (p.innerCore[i] || z)) continue;
    if (!z && (anywhere || !p.inner[i])) {
      occluded[i] = 1;
      continue;
    }
    if (z && !anywhere && cover.get(z)! < ZONE_COVER * r.zones.get(z)!) continue;
    const dE = Math.hypot(p.lab[i * 3]! - own.l, p.lab[i * 3 + 1]! - own.a, p.lab[i * 3 + 2]! - own.b);
    if (dE < ZONE_DELTA_E) occluded[i] = 1;
  }
}

/**
 * The zones the component covers (ZONE_COVER) that still show their feature around it (ZONE_SHOWS):
 * there it lies on the feature (make-up) or beside it, not in front of it.
 */
function featuresShown(p: OcclusionPlanes, own: Lab, cover: Map<number, number>, zones: Map<number, number>): number[] {
  const covered = [...cover].filter(([z, k]) => k >= ZONE_COVER * zones.get(z)!).map(([z]) => z);
  if (covered.length === 0) return [];
  const shows = new Map<number, number>();
  const painted = new Map<number, number>();
  for (let i = 0; i < p.zoneOf.length; i++) {
    const z = p.zoneOf[i]!;
    if (!z || !p.nonSkin[i] || !covered.includes(z)) continue;
    const counts = ownColour(p, i, own) ? painted : shows;
    counts.set(z, (counts.get(z) ?? 0) + 1);
  }
  const share = (m: Map<number, number>, z: number) => (m.get(z) ?? 0) / zones.get(z)!;
  const eye = (z: number) => p.eyeZones?.includes(z) === true && share(painted, z) < EYE_HIDDEN;
  return covered.filter((z) => share(painted, z) >= ZONE_PAINTED && (share(shows, z) >= ZONE_SHOWS || eye(z)));
}

/**
 * The component's pixels nearer (along the component, 4-connected) to a shown feature's zone than
 * to where the component enters at the outline: the feature's make-up. Clown paint under an eye or
 * a winged liner, as dark as the hair they touch at the temple, joined the hair's region and crossed
 * the inner face: kept in front, they stayed around the new eye as a ghost of the target's. Hair
 * falling over an eye's outer corner stays in front up to half-way to the eye.
 */
function nearerFeature(p: OcclusionPlanes, c: Component, queue: Int32Array, shown: readonly number[]): Uint8Array {
  const { width: w, height: h } = p;
  // 0: not in the component, 1: not reached yet, 2: nearer the outline, 3: nearer the feature.
  const owner = bytes(w * h);
  const front = ints(c.count);
  let tail = 0;
  for (let k = 0; k < c.count; k++) owner[queue[k]!] = 1;
  const around = aroundZones(p, shown);
  for (const seed of [2, 3]) {
    for (let k = 0; k < c.count; k++) {
      const i = queue[k]!;
      const at = seed === 2 ? p.edge[i] && !p.zoneOf[i] && !around[i] : around[i];
      if (!at || owner[i] !== 1) continue;
      owner[i] = seed;
      front[tail++] = i;
    }
  }
  for (let head = 0; head < tail; head++) {
    const i = front[head]!;
    const x = i % w;
    const y = (i - x) / w;
    for (let k = 0; k < 4; k++) {
      const j = neighbour(i, x, y, k, w, h);
      if (j < 0 || owner[j] !== 1) continue;
      owner[j] = owner[i]!;
      front[tail++] = j;
    }
  }
  for (let i = 0; i < owner.length; i++) owner[i] = owner[i] === 3 ? 1 : 0;
  return owner;
}

/**
 * The zones `shown` grown by MAKE_UP_REACH of the face size (4-connected steps): a feature's make-up
 * lies on it and around it. A cat-eye liner along a lowered eye's upper lid lies just beyond its
 * zone and joins the hair at the eye's outer corner: reached along itself, it was nearer the hair
 * (kept, a grey bar over the new eye).
 */
function aroundZones(p: OcclusionPlanes, shown: readonly number[]): Uint8Array {
  const { width: w, height: h } = p;
  let m = bytes(w * h);
  for (let i = 0; i < m.length; i++) m[i] = shown.includes(p.zoneOf[i]!) ? 1 : 0;
  for (let k = Math.round(MAKE_UP_REACH * p.size); k > 0; k--) m = dilate(m, w, h);
  return m;
}

/**
 * Largest extent (x or y, px) of the component's pixels inside the landmarks' hull: hair falling
 * down the side of a turned face lies along the grown inner face for its whole height without
 * crossing it.
 */
function coreSpan(p: OcclusionPlanes, c: Component, queue: Int32Array): number {
  const w = p.width;
  let x0 = w;
  let x1 = -1;
  let y0 = p.height;
  let y1 = -1;
  for (let k = 0; k < c.count; k++) {
    const i = queue[k]!;
    if (!p.innerCore[i]) continue;
    const x = i % w;
    const y = (i - x) / w;
    x0 = Math.min(x0, x);
    x1 = Math.max(x1, x);
    y0 = Math.min(y0, y);
    y1 = Math.max(y1, y);
  }
  return Math.max(x1 - x0, y1 - y0);
}

/**
 * Mean colour of the component where it enters the face (its pixels at the outline, else those
 * outside the inner face), if it has any pixel there.
 */
function entryColour(p: OcclusionPlanes, c: Component, queue: Int32Array): Lab | undefined {
  for (const at of [p.edge, p.inner]) {
    const entering = at === p.edge ? 1 : 0;
    let n = 0;
    const m = { l: 0, a: 0, b: 0 };
    for (let k = 0; k < c.count; k++) {
      const i = queue[k]!;
      if (at[i] !== entering) continue;
      n++;
      m.l += p.lab[i * 3]!;
      m.a += p.lab[i * 3 + 1]!;
      m.b += p.lab[i * 3 + 2]!;
    }
    if (n > 0) return { l: m.l / n, a: m.a / n, b: m.b / n };
  }
  return undefined;
}

/**
 * Whether pixel i is the colour of the lock `lock` (ZONE_DELTA_E), or darker in its hue: a lock's
 * core is darker than its mean, and lost to the skin there its holes broke the lock's thick part.
 */
function lockColour(p: OcclusionPlanes, i: number, lock: Lab): boolean {
  const dl = Math.max(0, p.lab[i * 3]! - lock.l);
  return Math.hypot(dl, p.lab[i * 3 + 1]! - lock.a, p.lab[i * 3 + 2]! - lock.b) < ZONE_DELTA_E;
}

/** Whether pixel i is within ZONE_DELTA_E of the colour `own`. */
function ownColour(p: OcclusionPlanes, i: number, own: Lab): boolean {
  return Math.hypot(p.lab[i * 3]! - own.l, p.lab[i * 3 + 1]! - own.a, p.lab[i * 3 + 2]! - own.b) < ZONE_DELTA_E;
}

/** Pixel i's (at x, y) k-th 4-neighbour (left, right, up, down), or -1 past the w × h edge. */
function neighbour(i: number, x: number, y: number, k: number, w: number, h: number): number {
  if (k === 0) return x === 0 ? -1 : i - 1;
  if (k === 1) return x === w - 1 ? -1 : i + 1;
  if (k === 2) return y === 0 ? -1 : i - w;
  return y === h - 1 ? -1 : i + w;
}
