import { createHash } from 'node:crypto';
import { PassThrough } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import { Gauge, type Registry } from 'prom-client';
import { PROGRESS_EVENT_INTERVAL_MS, isTerminalStatus, type ApiJob } from '../../contract/api.js';
import { Wakeable } from '../../runtime/wake.js';
import { wakeOn, type Signals } from '../../signals.js';
import { ApiError } from '../api-error.js';
import { fail } from '../envelope.js';

/** One SSE message; `data` is one line of JSON (JSON.stringify never emits a raw newline). */
function message(id: string | undefined, event: string, data: unknown): string {
  return `${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/**
 * An event's id names the state it carries (status, detail and progress), the same on every
 * connection: a client reconnecting with `Last-Event-ID` is not sent again what it already has,
 * and one that has a terminal state is answered 204 (a standard EventSource then stops).
 */
export function eventId(job: ApiJob): string {
  const state = JSON.stringify([job.status, job.status_detail, job.progress]);
  return createHash('sha256').update(state).digest('base64url').slice(0, 16);
}

const sameState = (a: ApiJob, b: ApiJob) =>
  a.status === b.status &&
  a.status_detail === b.status_detail &&
  JSON.stringify(a.progress) === JSON.stringify(b.progress);

/**
 * The open streams of one server: a count per owner (capped: 429 past it), a gauge (for operators
 * and for the test that a disconnect frees everything), and a way to end them all at shutdown.
 */
export class OpenStreams {
  private readonly perOwner = new Map<string, number>();
  private readonly closers = new Set<() => void>();
  private readonly gauge: Gauge;

  constructor(
    registry: Registry,
    private readonly maxPerOwner: number,
  ) {
    this.gauge = new Gauge({
      name: 'media_jobs_event_streams',
      help: 'Open Server-Sent Events streams (GET /api/v1/jobs/{uuid}/events).',
      registers: [registry],
    });
  }

  /** Counts a new stream of `owner`, or refuses it (429) when the owner has too many open. */
  admit(owner: string): void {
    const count = this.perOwner.get(owner) ?? 0;
    if (count >= this.maxPerOwner)
      throw new ApiError(
        429,
        `too many open event streams (at most ${this.maxPerOwner} per API key owner); close one first`,
        { 'retry-after': '5' },
      );
    this.perOwner.set(owner, count + 1);
    this.gauge.inc();
  }

  /** `close` ends the stream at shutdown, until the stream leaves. */
  track(close: () => void): void {
    this.closers.add(close);
  }

  leave(owner: string, close: () => void): void {
    this.closers.delete(close);
    const n = (this.perOwner.get(owner) ?? 1) - 1;
    if (n > 0) this.perOwner.set(owner, n);
    else this.perOwner.delete(owner);
    this.gauge.dec();
  }

  closeAll(): void {
    for (const close of [...this.closers]) close();
  }
}

export interface JobEventStreamOptions {
  uuid: string;
  owner: string;
  /** The `Last-Event-ID` the client reconnected with (a header's value, as Node gives it). */
  seen: string | string[] | undefined;
  pollMs: number;
  keepAliveMs: number;
  /** Reads the job again (the same read as the first). */
  read: () => Promise<ApiJob>;
  signals: Signals | undefined;
  streams: OpenStreams;
  log: FastifyBaseLogger;
}

/**
 * One admitted stream of one job's events: sends what changed, one read per wake-up or per pollMs
 * (queue positions move without a signal), until the terminal state or the client goes away.
 * Everything it holds (a wait, a listener, a timer, its count) is released once, either way.
 */
export class JobEventStream {
  readonly body = new PassThrough();
  private last: ApiJob | undefined;
  private closed = false;
  private lastProgressAt = -Infinity;
  /** A progress change waits for the end of the interval (then the latest state is sent). */
  private held = false;
  // Woken by this job's finish or progress; a signal during a read makes the next wait return at once.
  private readonly changed: Wakeable & { close(): void };
  private readonly gone = new AbortController();
  private readonly keepAlive: NodeJS.Timeout;
  private readonly end = () => {
    this.release();
    this.body.end();
  };

  constructor(private readonly o: JobEventStreamOptions) {
    this.changed = o.signals
      ? wakeOn(o.signals, ['job-finished', 'job-progress'], (u) => u === o.uuid)
      : Object.assign(new Wakeable(), { close() {} });
    this.keepAlive = setInterval(() => this.body.write(': keep-alive\n\n'), o.keepAliveMs);
    o.streams.track(this.end);
  }

  /** The response closes when we end it or when the client goes away: release either way. */
  onResponseClose(): void {
    this.release();
    this.body.destroy();
  }

  /** Sends the retry delay and the first state; follows the job unless that state is the end. */
  start(first: ApiJob): void {
    // Browsers reconnect after `retry` ms if the connection drops before the end.
    this.body.write(`retry: ${Math.max(1000, this.o.pollMs)}\n\n`);
    this.emit(first);
    if (isTerminalStatus(first.status)) this.end();
    else void this.follow();
  }

  // Read through a method: the stream may close during any await (TS would keep `closed` narrowed).
  private isClosed(): boolean {
    return this.closed;
  }

  private release(): void {
    if (this.closed) return;
    this.closed = true;
    this.gone.abort();
    clearInterval(this.keepAlive);
    this.changed.close();
    this.o.streams.leave(this.o.owner, this.end);
  }

  private emit(job: ApiJob): void {
    this.held = false;
    if (this.last && sameState(this.last, job)) return;
    const id = eventId(job);
    if (!this.last && id === this.o.seen) {
      this.last = job; // the state the client reconnected with: resume after it
      return;
    }
    const isStatus = !this.last || this.last.status !== job.status;
    if (!isStatus) {
      const now = performance.now();
      if (now - this.lastProgressAt < PROGRESS_EVENT_INTERVAL_MS) {
        this.held = true;
        return;
      }
      this.lastProgressAt = now;
    }
    this.body.write(message(id, isStatus ? 'status' : 'progress', job));
    this.last = job;
  }

  private async follow(): Promise<void> {
    while (!this.isClosed()) {
      const waitMs = this.held
        ? Math.max(1, this.lastProgressAt + PROGRESS_EVENT_INTERVAL_MS - performance.now())
        : this.o.pollMs;
      await this.changed.wait(waitMs, this.gone.signal);
      if (this.isClosed()) return;
      const job = await this.read();
      if (!job || this.isClosed()) return;
      this.emit(job);
      if (isTerminalStatus(job.status)) {
        this.end();
        return;
      }
    }
  }

  /** The job, or undefined after a failed read (then the stream ends with an `error` event). */
  private async read(): Promise<ApiJob | undefined> {
    try {
      return await this.o.read();
    } catch (err) {
      this.o.log.warn({ err, job_uuid: this.o.uuid }, 'event stream read failed');
      if (!this.isClosed()) {
        this.body.write(message(undefined, 'error', fail('the job could not be read; reconnect to resume')));
        this.end();
      }
      return undefined;
    }
  }
}
