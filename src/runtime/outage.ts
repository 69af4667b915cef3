import type { Logger } from 'pino';
import { Backoff, OUTAGE_BACKOFF } from './backoff.js';

/**
 * Logs an outage once when it starts and once when it ends, however many queries and connections
 * fail in between (a restart under load fails hundreds of them). `effect` says what the outage
 * means for the caller ("answering 503", "workers pause").
 */
export class OutageLog {
  private since: number | undefined;

  constructor(
    private readonly log: Logger | undefined,
    private readonly what: string,
    private readonly effect = 'answering 503',
  ) {}

  get down(): boolean {
    return this.since !== undefined;
  }

  failed(err: unknown): void {
    if (this.since !== undefined) return;
    // A duration for the log: monotonic time, not the service clock.
    this.since = performance.now();
    this.log?.warn({ err }, `${this.what} unavailable: ${this.effect}, retrying until it is back`);
  }

  succeeded(): void {
    if (this.since === undefined) return;
    this.log?.info({ down_ms: Math.round(performance.now() - this.since) }, `${this.what} is back`);
    this.since = undefined;
  }
}

/** A dependency a loop may wait out (the database: `DATABASE` in store/errors.ts). */
export interface Dependency {
  /** Its name in the log ("result storage"). */
  what: string;
  /** The errors that mean it is down (the others are logged as unexpected). */
  isOutage: (err: unknown) => boolean;
}

export interface OutageBackoffOptions {
  log: Logger | undefined;
  /** Names the loop in the log ("workers", "webhook dispatcher"). */
  who: string;
  dependency: Dependency;
  /** The pause after an error that is not an outage; default 1 s. */
  otherMs?: number;
}

/**
 * How a server loop rides out an outage of its dependency: 100 ms doubling to 5 s between attempts
 * (the one Backoff), one warning when the outage starts and one line when it ends (OutageLog),
 * however many attempts fail. Errors that are not an outage are logged each time and retried
 * after `otherMs`.
 */
export class OutageBackoff {
  private readonly backoff = new Backoff(OUTAGE_BACKOFF);
  private readonly outage: OutageLog;

  constructor(private readonly opts: OutageBackoffOptions) {
    this.outage = new OutageLog(opts.log, opts.dependency.what, `${opts.who} pause`);
  }

  /** The current pause of an outage (0 when there is none). */
  get currentMs(): number {
    return this.backoff.currentMs;
  }

  /** True while the last attempt met an outage. */
  get down(): boolean {
    return this.outage.down;
  }

  /** Records a failed attempt; answers how long to wait before the next one. */
  failed(err: unknown): number {
    if (!this.opts.dependency.isOutage(err)) {
      this.opts.log?.error({ err }, `${this.opts.who}: unexpected error; retrying`);
      return this.opts.otherMs ?? 1_000;
    }
    this.outage.failed(err);
    return this.backoff.next();
  }

  /** Records a successful attempt (ends an outage). */
  succeeded(): void {
    this.backoff.reset();
    this.outage.succeeded();
  }
}
