import type { Signals } from '../../signals.js';

const MINUTE = 60_000;

/**
 * Finished jobs per minute over the last hour, counted in process memory from the `job-finished`
 * signal (which reaches every process on PostgreSQL through NOTIFY, and every component of an
 * embedded SQLite process). A ring of 60 minute buckets: O(1) per finish and per read, no query,
 * nothing that grows with the jobs table. It starts empty when the process starts.
 */
export class ThroughputMeter {
  private readonly counts = new Array<number>(60).fill(0);
  private readonly minutes = new Array<number>(60).fill(-1);
  readonly since: number;
  private readonly onFinished = () => this.record(this.now());

  constructor(
    private readonly signals: Signals | undefined,
    private readonly now: () => number,
  ) {
    this.since = now();
    signals?.on('job-finished', this.onFinished);
  }

  record(at: number): void {
    const minute = Math.floor(at / MINUTE);
    const slot = minute % 60;
    if (this.minutes[slot] !== minute) {
      this.minutes[slot] = minute;
      this.counts[slot] = 0;
    }
    this.counts[slot]! += 1;
  }

  /** The last 60 minutes, oldest first, the current (partial) minute last. */
  series(at = this.now()): Array<{ minute: string; finished: number }> {
    const current = Math.floor(at / MINUTE);
    const out: Array<{ minute: string; finished: number }> = [];
    for (let m = current - 59; m <= current; m++) {
      const slot = m % 60;
      out.push({
        minute: new Date(m * MINUTE).toISOString(),
        finished: this.minutes[slot] === m ? this.counts[slot]! : 0,
      });
    }
    return out;
  }

  close(): void {
    this.signals?.off('job-finished', this.onFinished);
  }
}
