/**
 * Which faces to swap in each frame, and where their landmarks are. Faces are detected on key frames
 * (every `keyInterval` frames, or sooner when tracking looks wrong); in between, each face's landmarks
 * come from the landmark net run on a crop placed by the previous analysed frame's landmarks, on the
 * frames `measures` names (the caller interpolates the others). Landmarks are
 * smoothed over time (One-Euro). Identity is kept by face descriptor: a face that leaves and comes
 * back is recognised, and `reference` picks the person by descriptor.
 */
import { descriptorDistance, leftToRight } from '../face-swap/detect.js';
import { pickByIndex } from '../face-swap/pipeline.js';
import { refusalError, refusalOf, type Refusal } from '../face-swap/profile.js';
import { boundingRegion, extents, faceSize, iou } from '../face-swap/geometry.js';
import type { FaceMode } from '../face-swap/options.js';
import type { ColorStats } from '../face-swap/swap.js';
import type { Box, Point, RgbImage } from '../face-swap/types.js';
import { cropFrame, shiftPoints } from './region.js';
import { LandmarkFilter } from './smooth.js';
import type { FoundFace } from './worker.js';

export interface TrackerDeps {
  /** Faces on a whole frame (key frames), largest first, with landmarks. */
  detect(frame: RgbImage): Promise<FoundFace[]>;
  /** The same with the image job's detector (face-detect's faces and order), for picking faces by index. */
  detectPrecise?(frame: RgbImage): Promise<FoundFace[]>;
  /** Landmarks for one box of a crop, in crop coordinates. */
  landmarks(crop: RgbImage, box: Box): Promise<Point[]>;
  descriptor(crop: RgbImage, landmarks: Point[]): Promise<Float32Array>;
}

export interface TrackerConfig {
  mode: FaceMode;
  /** The reference person's descriptor (mode `reference`). */
  reference?: Float32Array | undefined;
  matchThreshold: number;
  keyInterval: number;
  fps: number;
  maxFaces: number;
  /** target_face_indices: these faces (left to right) of the first frame with a face are the ones followed. */
  indices?: readonly number[] | undefined;
}

/** The detector's box expressed relative to the landmarks' bounding box, so tracking crops look like detections. */
interface BoxRel {
  cx: number;
  cy: number;
  w: number;
  h: number;
}

export interface Track {
  id: number;
  descriptor?: Float32Array | undefined;
  raw: Point[];
  smooth: Point[];
  filter: LandmarkFilter;
  boxRel: BoxRel;
  active: boolean;
  misses: number;
  /** Running average of the colour statistics measured on this face's swaps (set by the caller). */
  stats?: ColorStats | undefined;
  /** Why the swap refuses this face on the last analysed frame (profile.ts refusalOf), if it does. */
  refused?: Refusal | undefined;
}

/** A face a key frame's detector found that no active track follows: the guard keeps out of it. */
export interface OtherFace {
  box: Box;
  landmarks: Point[];
  /** Detections in a row that missed it since. */
  misses: number;
}

function bbox(points: readonly Point[]): Box {
  const { x0, y0, x1, y1 } = extents(points);
  return { x: x0, y: y0, width: Math.max(1, x1 - x0), height: Math.max(1, y1 - y0) };
}

function relate(box: Box, lm: readonly Point[]): BoxRel {
  const b = bbox(lm);
  return {
    cx: (box.x + box.width / 2 - (b.x + b.width / 2)) / b.width,
    cy: (box.y + box.height / 2 - (b.y + b.height / 2)) / b.height,
    w: box.width / b.width,
    h: box.height / b.height,
  };
}

function boxFrom(lm: readonly Point[], rel: BoxRel): Box {
  const b = bbox(lm);
  const w = rel.w * b.width;
  const h = rel.h * b.height;
  return {
    x: b.x + b.width / 2 + rel.cx * b.width - w / 2,
    y: b.y + b.height / 2 + rel.cy * b.height - h / 2,
    width: w,
    height: h,
  };
}

/**
 * Landmarks are measured on every MEASURE_EVERY-th frame (and every key frame); the frames between
 * are swapped with landmarks interpolated between their measured neighbours (face-swap.ts). The
 * landmark net was a tenth of a video frame's CPU.
 */
export const MEASURE_EVERY = 2;

export class FaceTracker {
  readonly tracks: Track[] = [];
  private nextId = 1;
  /** The last frame analysed: the smoothing's time step spans the frames between. */
  private lastIndex: number | undefined;
  /** Whether any face was ever detected, and the nearest reference distance seen (for error messages). */
  sawFace = false;
  closestReference = Infinity;
  /** The faces detections found that no active track follows, for the guard (updateOthers). */
  others: OtherFace[] = [];

  constructor(
    private readonly deps: TrackerDeps,
    private readonly cfg: TrackerConfig,
  ) {}

  /** Whether frame `index` must be analysed; the others may be interpolated (see MEASURE_EVERY). */
  measures(index: number): boolean {
    return index % MEASURE_EVERY === 0 || index % this.cfg.keyInterval === 0;
  }

  /** Active tracks for frame `index`, with smoothed landmarks in frame coordinates. */
  async analyse(frame: RgbImage, index: number): Promise<Track[]> {
    const active = this.tracks.filter((t) => t.active);
    let suspicious = false as boolean; // set inside the callback below
    const tracked = await Promise.all(active.map((t) => this.follow(frame, t)));
    active.forEach((t, k) => {
      const lm = tracked[k]!;
      const before = faceSize(t.raw);
      const after = faceSize(lm);
      const a = bbox(t.raw);
      const b = bbox(lm);
      const moved = Math.hypot(a.x + a.width / 2 - (b.x + b.width / 2), a.y + a.height / 2 - (b.y + b.height / 2));
      // The landmark net always answers, even on a crop with no face: a sudden change of size or a jump
      // means the face was lost (occluded, turned away, out of the picture). Check with the detector.
      if (!(after > 0.7 * before && after < 1.4 * before && moved < 0.5 * before)) suspicious = true;
      t.raw = lm;
    });

    if (index % this.cfg.keyInterval === 0 || suspicious) await this.keyFrame(frame);

    const dt = (index - (this.lastIndex ?? index - 1)) / this.cfg.fps;
    this.lastIndex = index;
    const out = this.tracks.filter((t) => t.active);
    for (const t of out) {
      t.smooth = t.filter.next(t.raw, dt, faceSize(t.raw));
      // Judged on the measurement and on what the swap would use: the smoothing lags a turn.
      t.refused = refusalOf(frame, t.raw) ?? refusalOf(frame, t.smooth);
    }
    return out;
  }

  /** The detector's box of a followed face, placed by its landmarks (as the last detection framed it). */
  boxOf(t: Track): Box {
    return boxFrom(t.raw, t.boxRel);
  }

  /** Landmarks of a tracked face on this frame, from a crop placed by its previous landmarks. */
  private async follow(frame: RgbImage, t: Track): Promise<Point[]> {
    const box = boxFrom(t.raw, t.boxRel);
    const margin = 0.15 * Math.max(box.width, box.height);
    const r = boundingRegion(
      [
        { x: box.x, y: box.y },
        { x: box.x + box.width, y: box.y + box.height },
      ],
      margin,
      frame.width,
      frame.height,
    );
    if (r.width < 8 || r.height < 8) return t.raw;
    const lm = await this.deps.landmarks(cropFrame(frame, r), { ...box, x: box.x - r.left, y: box.y - r.top });
    return shiftPoints(lm, r.left, r.top);
  }

  private async descriptorOf(frame: RgbImage, lm: Point[]): Promise<Float32Array> {
    const r = boundingRegion(lm, 0.6 * faceSize(lm), frame.width, frame.height);
    return this.deps.descriptor(cropFrame(frame, r), shiftPoints(lm, -r.left, -r.top));
  }

  private activate(t: Track, face: FoundFace): void {
    t.raw = face.landmarks;
    t.boxRel = relate(face.box, face.landmarks);
    t.filter.reset();
    t.active = true;
    t.misses = 0;
  }

  /**
   * Detection on a key frame: continuing faces re-anchored, lost ones dropped, new ones admitted; the
   * faces left unfollowed are `others`.
   */
  private async keyFrame(frame: RgbImage): Promise<void> {
    const picking = this.cfg.indices !== undefined && this.tracks.length === 0;
    const found =
      picking && this.deps.detectPrecise ? await this.deps.detectPrecise(frame) : await this.deps.detect(frame);
    if (found.length > 0) this.sawFace = true;
    await this.admit(frame, found, picking);
    this.updateOthers(found);
  }

  /**
   * `others` after a detection: the faces it found that no active track follows, and those of the
   * last one it missed (the detector misses a face now and then; missed twice, it is gone).
   */
  private updateOthers(found: readonly FoundFace[]): void {
    const followed = this.tracks.filter((t) => t.active).map((t) => this.boxOf(t));
    const near = (boxes: readonly Box[], b: Box) => boxes.some((a) => iou(a, b) > 0.3);
    const now = found
      .filter((f) => !near(followed, f.box))
      .map((f) => ({ box: f.box, landmarks: f.landmarks, misses: 0 }));
    const missed = this.others
      .filter(
        (o) =>
          o.misses === 0 &&
          !near(followed, o.box) &&
          !near(
            found.map((f) => f.box),
            o.box,
          ),
      )
      .map((o) => ({ ...o, misses: 1 }));
    this.others = [...now, ...missed];
  }

  /** A key frame's faces: the tracks continued, and the faces the mode wants admitted. */
  private async admit(frame: RgbImage, found: readonly FoundFace[], picking: boolean): Promise<void> {
    const usedF = this.continueTracks(found);
    const fresh = found.filter((_, i) => !usedF.has(i));
    if (fresh.length === 0) return;
    if (picking) {
      // The faces at the given indices of the first frame with a face, left to right as face-detect orders them.
      const picked = pickByIndex(
        leftToRight(fresh),
        this.cfg.indices!,
        'input.target',
        ' on the first frame with a face',
      );
      // A face picked by index that the swap refuses there fails the job, as in the image swap.
      picked.forEach((f, k) => {
        const reason = refusalOf(frame, f.landmarks);
        if (reason) throw refusalError(reason, f.box, 'input.target', this.cfg.indices![k]);
      });
      for (const f of picked) this.newTrack(f).descriptor = await this.descriptorOf(frame, f.landmarks);
      return;
    }
    if (this.cfg.mode === 'largest' && this.tracks.length === 0 && !this.cfg.indices) {
      // The largest face where faces first appear becomes the person followed through the video.
      this.newTrack(fresh[0]!).descriptor = await this.descriptorOf(frame, fresh[0]!.landmarks);
      return;
    }
    if (!this.wantsFaces()) return;
    const descriptors: Float32Array[] = [];
    for (const f of fresh) descriptors.push(await this.descriptorOf(frame, f.landmarks));
    if (this.cfg.mode === 'reference') this.admitReference(fresh, descriptors);
    else this.admitKnownOrNew(fresh, descriptors);
  }

  /**
   * Matches the active tracks to this key frame's detections (greedy, by overlap of the boxes); a
   * track missing twice in a row is dropped. Returns the indices of the detections taken.
   */
  private continueTracks(found: readonly FoundFace[]): Set<number> {
    const active = this.tracks.filter((t) => t.active);
    const pairs: { t: Track; f: number; o: number }[] = [];
    for (const t of active) {
      const tb = boxFrom(t.raw, t.boxRel);
      found.forEach((f, i) => {
        const o = iou(tb, f.box);
        if (o > 0.3) pairs.push({ t, f: i, o });
      });
    }
    pairs.sort((a, b) => b.o - a.o);
    const usedT = new Set<Track>();
    const usedF = new Set<number>();
    for (const p of pairs) {
      if (usedT.has(p.t) || usedF.has(p.f)) continue;
      usedT.add(p.t);
      usedF.add(p.f);
      p.t.misses = 0;
      // A track that drifted (or jumped) restarts from the detection.
      const f = found[p.f]!;
      if (iou(bbox(p.t.raw), bbox(f.landmarks)) < 0.5) this.activate(p.t, f);
    }
    for (const t of active) {
      if (usedT.has(t)) continue;
      // The detector misses a face now and then; a face must be missing twice to be dropped.
      if (++t.misses >= 2) {
        t.active = false;
        t.filter.reset();
      }
    }
    return usedF;
  }

  /** Whether new faces of a key frame are looked at (descriptors are dear). */
  private wantsFaces(): boolean {
    if (this.cfg.indices) return this.tracks.some((t) => !t.active);
    if (this.cfg.mode === 'all') return this.tracks.length < this.cfg.maxFaces || this.tracks.some((t) => !t.active);
    return this.tracks.every((t) => !t.active);
  }

  /** `reference`: the fresh face nearest the reference descriptor, if near enough, is the one track. */
  private admitReference(fresh: readonly FoundFace[], descriptors: readonly Float32Array[]): void {
    let best = -1;
    let bestD = Infinity;
    descriptors.forEach((d, k) => {
      const dist = descriptorDistance(this.cfg.reference!, d);
      if (dist < bestD) [best, bestD] = [k, dist];
    });
    this.closestReference = Math.min(this.closestReference, bestD);
    if (best >= 0 && bestD <= this.cfg.matchThreshold) {
      const t = this.tracks[0] ?? this.newTrack(fresh[best]!);
      this.activate(t, fresh[best]!);
    }
  }

  /** `largest` (its one person came back?) and `all` (a known face came back, or a new one). */
  private admitKnownOrNew(fresh: readonly FoundFace[], descriptors: readonly Float32Array[]): void {
    fresh.forEach((f, k) => {
      const d = descriptors[k]!;
      let match: Track | undefined;
      let matchD = this.cfg.matchThreshold;
      for (const t of this.tracks) {
        if (t.active || !t.descriptor) continue;
        const dist = descriptorDistance(t.descriptor, d);
        if (dist <= matchD) [match, matchD] = [t, dist];
      }
      if (match) this.activate(match, f);
      else if (this.cfg.mode === 'all' && this.tracks.length < this.cfg.maxFaces) this.newTrack(f).descriptor = d;
    });
  }

  private newTrack(f: FoundFace): Track {
    const t: Track = {
      id: this.nextId++,
      raw: f.landmarks,
      smooth: f.landmarks,
      filter: new LandmarkFilter(),
      boxRel: relate(f.box, f.landmarks),
      active: true,
      misses: 0,
    };
    this.tracks.push(t);
    return t;
  }
}
