import type { Logger } from 'pino';
import { OutageBackoff, type Dependency } from './outage.js';
import { Wakeable } from './wake.js';

export interface BatchWriterOptions<I, O> {
  /** Writes `items` in one transaction; answers one output per item, in order. */
  write(items: readonly I[]): Promise<O[]>;
  /** Runs after a batch's commit, with the items and what `write` answered. */
  afterCommit?(items: readonly I[], out: readonly O[]): void;
  /** How long an item may wait out a database outage (ms); 0 fails it at the first one. */
  patience(item: I): number;
  /** Wall time, to age items against their patience. */
  now(): number;
  log?: Logger;
  /** Says what waits during an outage, for the log ("job changes"). */
  what: string;
  /** What the writes go to (the database: store/errors.ts DATABASE); its outages are waited out. */
  dependency: Dependency;
  /** A conflict with another writer (a deadlock): no outage, the items go again one by one. */
  isConflict?(err: unknown): boolean;
  maxBatch?: number;
  /**
   * How a batch waits for more items before it is written (default: it does not; natural batching
   * only). `'turn'`: an idle writer waits for the end of the current event-loop turn before its
   * first write, so everything that arrives in one turn (the requests of one poll of the sockets)
   * shares a transaction. `{ ms }`: every batch waits `ms()` (asked afresh for each batch, so a
   * writer lingers only while more is coming: Kafka's linger.ms) unless it is full already.
   */
  gather?: 'turn' | { ms(): number };
}

interface Pending<I, O> {
  item: I;
  since: number;
  resolve(out: O, item: I): void;
  reject(err: unknown, item: I): void;
}

/**
 * Natural batching (graphile-worker's `batch()`): while one batch's transaction is written, the next
 * one accumulates, so an idle writer adds no latency and a busy one shares a transaction (and its
 * commit) among everything that arrived meanwhile. A database outage keeps the batch and retries it
 * with the one Backoff, answering each item that has no patience left; any other error splits the
 * batch, so one bad item (or a deadlock with another process) never fails the others.
 */
export class BatchWriter<I, O> {
  private pending: Pending<I, O>[] = [];
  private flushing: Promise<void> | undefined;
  private gathering = false;
  /** Cuts an outage's pause short: an arrival is tried at once. */
  private readonly retry = new Wakeable();
  private readonly backoff: OutageBackoff;

  constructor(private readonly opts: BatchWriterOptions<I, O>) {
    this.backoff = new OutageBackoff({ log: opts.log, who: opts.what, dependency: opts.dependency });
  }

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.post(item, resolve, reject);
    });
  }

  /**
   * submit without a promise: `written` or `failed` is called with the item once it is answered.
   * For a writer that takes an item per event (a webhook attempt): the same two functions serve
   * every item, where submit makes a promise and its functions for each.
   */
  post(item: I, written: (out: O, item: I) => void, failed: (err: unknown, item: I) => void): void {
    this.pending.push({ item, since: this.opts.now(), resolve: written, reject: failed });
    // An arrival during an outage's pause is tried at once (and answered at once if it is still down).
    this.retry.wake();
    this.kick();
  }

  /** Resolves when everything submitted so far has been written or answered. */
  async drain(): Promise<void> {
    while (this.flushing || this.gathering) await (this.flushing ?? new Promise((r) => setImmediate(r)));
  }

  private kick(): void {
    if (this.flushing || this.gathering || this.pending.length === 0) return;
    if (this.opts.gather === 'turn') {
      this.gathering = true;
      setImmediate(() => {
        this.gathering = false;
        this.start();
      });
      return;
    }
    this.start();
  }

  private start(): void {
    if (this.flushing || this.pending.length === 0) return;
    this.flushing = this.flush().finally(() => {
      this.flushing = undefined;
      // What arrived during the write has waited already: it goes at once.
      this.start();
    });
  }

  private async flush(): Promise<void> {
    const max = this.opts.maxBatch ?? 200;
    const { gather } = this.opts;
    const linger = typeof gather === 'object' ? gather.ms() : 0;
    if (linger > 0 && this.pending.length < max) await Wakeable.sleep(linger);
    const batch = this.pending.splice(0, max);
    for (;;) {
      try {
        const out = await this.opts.write(batch.map((p) => p.item));
        this.backoff.succeeded();
        this.settle(batch, out);
        return;
      } catch (err) {
        // A deadlock with another process's batch is no outage: the items go again, one by one.
        const conflict = this.opts.isConflict?.(err) ?? false;
        if (!this.opts.dependency.isOutage(err) || (conflict && batch.length > 1)) {
          await this.oneByOne(batch, err);
          return;
        }
        const waitMs = this.backoff.failed(err);
        const now = this.opts.now();
        for (const p of [...batch]) {
          if (now - p.since >= this.opts.patience(p.item)) {
            batch.splice(batch.indexOf(p), 1);
            p.reject(err, p.item);
          }
        }
        if (batch.length === 0) return;
        this.retry.clear();
        await this.retry.wait(waitMs);
        // Whatever arrived meanwhile joins the retry (and is answered by it).
        batch.push(...this.pending.splice(0, Math.max(0, max - batch.length)));
      }
    }
  }

  private async oneByOne(batch: Pending<I, O>[], err: unknown): Promise<void> {
    if (batch.length === 1) {
      batch[0]!.reject(err, batch[0]!.item);
      return;
    }
    for (const p of batch) {
      try {
        this.settle([p], await this.opts.write([p.item]));
      } catch (e) {
        p.reject(e, p.item);
      }
    }
  }

  private settle(batch: Pending<I, O>[], out: O[]): void {
    try {
      this.opts.afterCommit?.(
        batch.map((p) => p.item),
        out,
      );
    } catch (err) {
      // Committed is committed: a failing after-step (a listener's bug) must not fail the callers.
      this.opts.log?.error({ err }, `after-commit step of ${this.opts.what} failed`);
    }
    batch.forEach((p, i) => {
      p.resolve(out[i]!, p.item);
    });
  }
}
