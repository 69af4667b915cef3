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

  /** `who` names the loop in the log ("workers", "webhook dispatcher"). */
  constructor(
    private readonly log: Logger | undefined,
    private readonly who: string,
    private readonly otherMs = 1_000,
  ) {
    this.outage = new OutageLog(log, 'database', `${who} pause`);
  }

  /** The current pause of an outage (0 when there is none). */
  get currentMs(): number {
    return this.ms;
  }

  /** True while the last attempt met an outage. */
  get down(): boolean {
    return this.outage.down;
  }

  /** Records a failed attempt; answers how long to wait before the next one. */
  failed(err: unknown): number {
    if (!isDatabaseUnavailable(err)) {
      this.log?.error({ err }, `${this.who}: unexpected error; retrying`);
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
