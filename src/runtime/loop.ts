import { Wakeable } from './wake.js';

export interface LoopOptions {
  /** One pass; answers how long to wait before the next (a wake-up cuts the wait short). */
  step(signal: AbortSignal): Promise<number>;
  /** A pass threw: answers how long to wait before the next (kept wake-ups are dropped first). */
  failed(err: unknown): number;
}

/**
 * The one shape of a background loop (housekeeping, the worker pool, the SDK's claim slots): run a
 * step, wait what it asked on the loop's Wakeable, go again until stopped. `stop()` aborts the
 * step's signal, ends the wait and resolves when the current pass has returned. Server-free.
 */
export class Loop {
  readonly wake = new Wakeable();
  private stopper = new AbortController();
  private done: Promise<void> = Promise.resolve();

  constructor(private readonly opts: LoopOptions) {}

  get stopping(): boolean {
    return this.stopper.signal.aborted;
  }

  /** Aborted by stop(). */
  get signal(): AbortSignal {
    return this.stopper.signal;
  }

  start(): void {
    this.stopper = new AbortController();
    this.done = this.run();
  }

  /** Settles when the loop has ended (it ends only by stop(); start() first). */
  get finished(): Promise<void> {
    return this.done;
  }

  /** Stops the loop; resolves once its current pass has returned. */
  async stop(reason?: unknown): Promise<void> {
    this.stopper.abort(reason);
    this.wake.wake();
    await this.done;
  }

  private async run(): Promise<void> {
    const { signal } = this.stopper;
    while (!signal.aborted) {
      let waitMs: number;
      try {
        waitMs = await this.opts.step(signal);
      } catch (err) {
        waitMs = this.opts.failed(err);
        this.wake.clear();
      }
      if (waitMs > 0 && !this.stopping) await this.wake.wait(waitMs, signal);
    }
  }
}
