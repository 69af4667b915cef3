import type { Logger } from 'pino';
import { isDatabaseUnavailable } from '../store/errors.js';
import { OutageLog } from '../store/outage.js';

const MIN_MS = 100;
const MAX_MS = 5_000;

/** Which dependency a Backoff waits for: the database unless told otherwise. */
export interface Dependency {
  /** Its name in the log ("result storage"). */
  what: string;
  /** The errors that mean it is down (the others are logged as unexpected). */
  isOutage: (err: unknown) => boolean;
}

const DATABASE: Dependency = { what: 'database', isOutage: isDatabaseUnavailable };

/**
 * How a background loop rides out an outage (of the database, or of `dependency`): 100 ms doubling
 * to 5 s between attempts, one warning when the outage starts and one line when it ends
 * (OutageLog), however many attempts fail. Errors that are not an outage are logged each time and
 * retried after `otherMs`.
 */
export class Backoff {
  private ms = 0;
  private readonly outage: OutageLog;

  /** `who` names the loop in the log ("workers", "webhook dispatcher"). */
  constructor(
    private readonly log: Logger | undefined,
    private readonly who: string,
    private readonly otherMs = 1_000,
    private readonly dependency: Dependency = DATABASE,
  ) {
    this.outage = new OutageLog(log, dependency.what, `${who} pause`);
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
    if (!this.dependency.isOutage(err)) {
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
