export interface BackoffOptions {
  /** The first delay (ms). */
  firstMs: number;
  /** No delay is longer (ms). */
  maxMs: number;
  /** Each delay is the previous one times this; default 2. */
  factor?: number;
  /** `half`: a delay is drawn between half and all of its value, so clients do not retry in step. */
  jitter?: 'none' | 'half';
}

/** Riding out an outage (server loops, result uploads, the worker SDK): 100 ms doubling to 5 s. */
export const OUTAGE_BACKOFF: BackoffOptions = { firstMs: 100, maxMs: 5_000 };

/**
 * The one backoff formula: `firstMs × factor^n`, capped at `maxMs`, optionally jittered. A loop
 * calls `next()` after each failure and `reset()` after a success; `delay(n)` answers the n-th
 * delay without state (a retry counter kept elsewhere). Server-free.
 */
export class Backoff {
  private n = 0;
  private last = 0;

  constructor(private readonly opts: BackoffOptions) {}

  /** The delay before retry `n` (0: the first retry). */
  delay(n: number): number {
    const { firstMs, maxMs, factor = 2, jitter = 'none' } = this.opts;
    // The exponent is capped so a long outage's count cannot overflow to Infinity × 0.
    const base = Math.min(maxMs, firstMs * factor ** Math.min(n, 64));
    return jitter === 'half' ? Math.round(base / 2 + Math.random() * (base / 2)) : base;
  }

  /** Records a failure; answers how long to wait before the next attempt. */
  next(): number {
    this.last = this.delay(this.n++);
    return this.last;
  }

  /** The last delay handed out (0 after a reset). */
  get currentMs(): number {
    return this.last;
  }

  reset(): void {
    this.n = 0;
    this.last = 0;
  }
}
