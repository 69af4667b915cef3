/**
 * Temporal smoothing of landmarks with the One-Euro filter (Casiez, Roussel & Vogel, CHI 2012): a
 * low-pass filter whose cutoff rises with speed, so a still face does not jitter and a moving face
 * does not lag much. Speeds are measured in face sizes per second, so the same settings fit a face of
 * 80 px and one of 800 px.
 */
import type { Point } from '../face-swap/types.js';

export interface OneEuroParams {
  /** Cutoff (Hz) at rest: lower removes more jitter from a still face. */
  minCutoff: number;
  /** How fast the cutoff rises with speed (per face size per second). */
  beta: number;
  /** Cutoff (Hz) of the speed estimate itself. */
  dCutoff: number;
}

/** Chosen on the test clips: jitter of a still face drops ~4x, a pan of 1 face size/s lags < 2% of the face. */
export const DEFAULT_ONE_EURO: Readonly<OneEuroParams> = { minCutoff: 1.0, beta: 6, dCutoff: 1.0 };

const alpha = (cutoff: number, dt: number) => 1 / (1 + 1 / (2 * Math.PI * cutoff * dt));

export class LandmarkFilter {
  private x: Float64Array | undefined;
  private dx: Float64Array | undefined;

  constructor(private readonly params: OneEuroParams = DEFAULT_ONE_EURO) {}

  /** Filters one frame's landmarks; `dt` is the time since the previous frame, `size` the face size in px. */
  next(points: readonly Point[], dt: number, size: number): Point[] {
    const n = points.length * 2;
    const raw = new Float64Array(n);
    points.forEach((p, i) => {
      raw[2 * i] = p.x;
      raw[2 * i + 1] = p.y;
    });
    if (!this.x || this.x.length !== n || !(dt > 0)) {
      this.x = raw;
      this.dx = new Float64Array(n);
      return points.map((p) => ({ x: p.x, y: p.y }));
    }
    const { minCutoff, beta, dCutoff } = this.params;
    const ad = alpha(dCutoff, dt);
    const dx = this.dx!;
    const x = this.x;
    // One speed for the whole face (its mean point speed), so all points share one cutoff and the
    // face moves as a whole instead of fast points running ahead of slow ones.
    let speed = 0;
    for (let i = 0; i < n; i++) {
      dx[i] = dx[i]! + ad * ((raw[i]! - x[i]!) / dt - dx[i]!);
      speed += Math.abs(dx[i]!);
    }
    speed /= n * Math.max(1, size);
    const a = alpha(minCutoff + beta * speed, dt);
    for (let i = 0; i < n; i++) x[i] = x[i]! + a * (raw[i]! - x[i]!);
    const out: Point[] = [];
    for (let i = 0; i < n; i += 2) out.push({ x: x[i]!, y: x[i + 1]! });
    return out;
  }

  reset(): void {
    this.x = undefined;
    this.dx = undefined;
  }
}
