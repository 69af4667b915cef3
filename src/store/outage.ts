import type { Logger } from 'pino';

/**
 * Logs a database outage once when it starts and once when it ends, however many queries and
 * connections fail in between (a restart under load fails hundreds of them).
 */
export class OutageLog {
  private since: number | undefined;

  constructor(
    private readonly log: Logger | undefined,
    private readonly what: string,
  ) {}

  get down(): boolean {
    return this.since !== undefined;
  }

  failed(err: unknown): void {
    if (this.since !== undefined) return;
    this.since = Date.now();
    this.log?.warn({ err }, `${this.what} unavailable; answering 503 and retrying until it is back`);
  }

  succeeded(): void {
    if (this.since === undefined) return;
    this.log?.info({ down_ms: Date.now() - this.since }, `${this.what} available again`);
    this.since = undefined;
  }
}
