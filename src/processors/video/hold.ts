/**
 * Per-frame decisions held against short flips. Whether a followed face is refused (profile.ts: too
 * small, in profile) is judged on each measured frame's landmarks, and a face near a threshold
 * (about 32 px wide, or turned about as far as the rule allows) reads one way on a frame or two and
 * the other way around them: the face then popped between swapped and original for a few frames at
 * a time. Here a measured frame's verdict waits for the next HOLD - 1 measured frames, and a change
 * from the one before stands only if they keep it: a flip must last HOLD measured frames (with
 * MEASURE_EVERY 2, five or six frames) to show. A real turn to profile, which lasts longer, still
 * starts and ends on the frame it did.
 */
import type { Refusal } from '../face-swap/profile.js';
import type { Point, RgbImage } from '../face-swap/types.js';
import type { OtherFace, Track } from './tracker.js';

/** Measured frames a change of verdict must last (this one and the next HOLD - 1). */
export const HOLD = 3;

/** A followed face on one frame: its landmarks there, and why the swap refuses it there, if it does. */
export interface FaceOnFrame {
  landmarks: Point[];
  refused?: Refusal | undefined;
}

/** A face of a frame as the swap is given it: its track (colour statistics) too. */
export interface FrameFace extends FaceOnFrame {
  track: Track;
}

/** A frame the tracker measured (FaceTracker.measures), and the frames held since the measured one before. */
export interface MeasuredFrame {
  frame: RgbImage;
  index: number;
  /** Each active track's smoothed landmarks and refusal there. */
  faces: Map<Track, FaceOnFrame>;
  /** The faces no track follows (the guard's zones) as the tracker had them then. */
  others: OtherFace[];
  /** Frames between the measured frame before and this one, in order. */
  held: { frame: RgbImage; index: number }[];
}

/** A frame ready to swap: its faces with their final verdicts. */
export interface ReadyFrame {
  frame: RgbImage;
  faces: FrameFace[];
  others: OtherFace[];
}

/**
 * The verdict on a face of a measured frame: as measured (`now`), unless that changes the one
 * before (final) and the measured frames `ahead` (as measured; a face missing there counts as
 * keeping it) do not all keep the change: then the one before's.
 */
export function held(
  before: FaceOnFrame | undefined,
  now: Refusal | undefined,
  ahead: readonly (FaceOnFrame | undefined)[],
): Refusal | undefined {
  const refused = now !== undefined;
  if (!before || (before.refused !== undefined) === refused) return now;
  return ahead.every((f) => !f || (f.refused !== undefined) === refused) ? now : before.refused;
}

/**
 * The faces of a held frame at `at`: each face of the measured frame before it, its landmarks
 * interpolated towards the measured frame after it (`next`) when the face is still followed there.
 * Refused on either measured frame, it is refused here (its landmarks between a frontal and a
 * profile face's fit neither).
 */
function between(last: MeasuredFrame, next: MeasuredFrame, at: number): FrameFace[] {
  const w = (at - last.index) / (next.index - last.index);
  return [...last.faces].map(([track, { landmarks: a, refused }]) => {
    const b = next.faces.get(track);
    if (!b) return { track, landmarks: a, refused };
    const landmarks = a.map((p, i) => ({
      x: p.x + w * (b.landmarks[i]!.x - p.x),
      y: p.y + w * (b.landmarks[i]!.y - p.y),
    }));
    return { track, landmarks, refused: refused ?? b.refused };
  });
}

/**
 * Measured frames in, frames ready to swap out, in order, HOLD - 1 measured frames later than they
 * came (a verdict needs the next ones').
 */
export class VerdictHold {
  /** The last measured frame released (its verdicts final). */
  private last: MeasuredFrame | undefined;
  /** Measured frames waiting for the ones after them. */
  private readonly waiting: MeasuredFrame[] = [];

  /** Takes the next measured frame; returns the frames it makes ready (a measured frame's held frames, then it). */
  push(next: MeasuredFrame): ReadyFrame[] {
    this.waiting.push(next);
    return this.waiting.length < HOLD ? [] : this.release(this.waiting.shift()!);
  }

  /** At the end: every waiting frame, each judged on those after it. */
  flush(): ReadyFrame[] {
    const ready: ReadyFrame[] = [];
    while (this.waiting.length > 0) ready.push(...this.release(this.waiting.shift()!));
    return ready;
  }

  private release(m: MeasuredFrame): ReadyFrame[] {
    for (const [track, face] of m.faces) {
      const ahead = this.waiting.map((a) => a.faces.get(track));
      face.refused = held(this.last?.faces.get(track), face.refused, ahead);
    }
    const own = [...m.faces].map(([track, f]) => ({ track, ...f }));
    const last = this.last;
    const faces = (at: number) => (last ? between(last, m, at) : own);
    const ready = m.held.map((h) => ({ frame: h.frame, faces: faces(h.index), others: m.others }));
    ready.push({ frame: m.frame, faces: own, others: m.others });
    this.last = m;
    return ready;
  }
}
