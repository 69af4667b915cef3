import type { Logger } from 'pino';

/**
 * Logs a database outage once when it starts and once when it ends, however many queries and
 * connections fail in between (a restart under load fails hundreds of them). `effect` says what
 * the outage means for the caller ("answering 503", "workers pause").
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
