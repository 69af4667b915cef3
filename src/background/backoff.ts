import type { Logger } from 'pino';
import { isDatabaseUnavailable } from '../store/errors.js';
import { OutageLog } from '../store/outage.js';

const MIN_MS = 100;
const MAX_MS = 5_000;

/**
 * How a background loop rides out a database outage: 100 ms doubling to 5 s between attempts, one
 * warning when the outage starts and one line when it ends (OutageLog), however many attempts fail.
 * Errors that are not an outage are logged each time and retried after `otherMs`.
 */
export class Backoff {
  private ms = 0;
  private readonly outage: OutageLog;

  constructor(
    private readonly log: Logger | undefined,
    private readonly what: string,
    private readonly otherMs = 1_000,
  ) {
    this.outage = new OutageLog(log, 'database', what);
  }

  /** True while the last attempt met an outage. */
  get down(): boolean {
    return this.outage.down;
  }

  /** Records a failed attempt; answers how long to wait before the next one. */
  failed(err: unknown): number {
    if (!isDatabaseUnavailable(err)) {
      this.log?.error({ err }, `${this.what} failed`);
      return this.otherMs;
    }
    this.outage.failed(err);
    this.ms = Math.min(MAX_MS, Math.max(MIN_MS, this.ms * 2));
    return this.ms;
  }

  /** Records a successful attempt (ends an outage). */
  succeeded(): void {
    this.ms = 0;
    this.outage.succeeded();
  }
}
