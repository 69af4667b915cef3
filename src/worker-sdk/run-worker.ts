import { ERROR_TYPES, SLOT_NAMES, type ErrorType, type SlotName } from '../contract/api.js';
import { heartbeatEveryMs, type ClaimedJob } from '../contract/worker.js';
import { Backoff, OUTAGE_BACKOFF } from '../runtime/backoff.js';
import { Loop } from '../runtime/loop.js';
import { Wakeable } from '../runtime/wake.js';
import { isTransient, WorkerClient, WorkerHttpError, type Claim } from './client.js';

const SLOTS = SLOT_NAMES;
export type MediaSlot = SlotName;

/** Progress goes out at once, but not more often than this (a chatty model must not flood the service). */
const PROGRESS_GAP_MS = 250;
/** The pause after an empty claim when `waitSeconds` is 0. */
const IDLE_PAUSE_MS = 1_000;
/** A stopping worker tries this long to hand its jobs back; then their leases expire instead. */
const RELEASE_WITHIN_MS = 10_000;
const DOWNLOAD_TRIES = 4;

/** A claimed job as the handler sees it. */
export interface WorkerJob {
  uuid: string;
  jobType: string;
  model: string;
  /** 1 for the first attempt; higher after a lost lease or a retryable failure. */
  attempt: number;
  /** The client's input; media slots hold arrays of signed URLs to the service's staged copies. */
  input: Record<string, unknown>;
  /** The media slots alone: signed, expiring URLs, no credentials needed. */
  media: Partial<Record<MediaSlot, string[]>>;
}

export interface JobContext {
  /**
   * Aborted when the client cancels, the job times out, the lease is lost (409), or the worker
   * stops and the grace is over. Honour it: the job is no longer this worker's.
   */
  signal: AbortSignal;
  /**
   * Reports progress, shown in the job's public status (`progress` and `status_detail`): sent at
   * once (at most every 250 ms) and with every heartbeat. `ctx.progress(42.5, 'denoising')` gives a
   * percentage (0–100) and the stage; `ctx.progress('denoising', 0.425)` (text, then a fraction
   * 0–1) is the same, and `ctx.progress('denoising')` a stage without a measure.
   */
  progress(percent: number, stage?: string): void;
  progress(stage: string, fraction?: number): void;
  /** Downloads a staged input URL (network errors and 5xx are retried a few times). */
  download(url: string): Promise<{ bytes: Buffer; contentType: string }>;
}

export interface JobOutput {
  bytes: Buffer | Uint8Array;
  /** The service sniffs media types from the bytes; JSON and text are taken as declared here. */
  contentType: string;
}

/** Throw it from a handler to fail the job with this `error_type` (retryable: another attempt may succeed). */
export class WorkerJobError extends Error {
  readonly retryable: boolean;
  constructor(
    readonly errorType: ErrorType,
    message: string,
    opts: { retryable?: boolean } = {},
  ) {
    // Checked here (for JavaScript callers): the service would refuse it, and the job would only
    // come back after its lease ran out.
    if (!(ERROR_TYPES as readonly string[]).includes(errorType))
      throw new TypeError(`WorkerJobError: error_type must be one of ${ERROR_TYPES.join(', ')} (got "${errorType}")`);
    super(message);
    this.name = 'WorkerJobError';
    this.retryable = opts.retryable ?? false;
  }
}

export interface RunWorkerOptions {
  /** The service's base URL, e.g. https://jobs.example.com */
  url: string;
  /** A worker token (mjw_…) from `media-jobs workers create-token`. */
  token: string;
  jobTypes: string[];
  /** Jobs run at once (default 1); a claim is made only while a slot is free. */
  concurrency?: number;
  handle(job: WorkerJob, ctx: JobContext): Promise<JobOutput>;
  /** Long-poll length of each claim, 0–30 s (default 30). */
  waitSeconds?: number;
  /** Heartbeat at most this far apart (default and ceiling: a third of the lease the service grants). */
  heartbeatMs?: number;
  /** Where the worker reports what it does (default: nowhere). */
  log?: (message: string, fields?: Record<string, unknown>) => void;
}

export interface RemoteWorker {
  /**
   * Stops claiming (an in-flight long poll is abandoned), lets running jobs finish for `graceMs`
   * (default 30 s), then aborts their signals and hands them back (`release`: the attempt does
   * not count). Resolves once every handler has returned.
   */
  stop(graceMs?: number): Promise<void>;
  /** Settles when the worker has stopped; rejects if it had to stop (a revoked token, a refused job type). */
  done: Promise<void>;
  /** Jobs running now. */
  readonly active: number;
}

type Why = 'cancelled' | 'lost' | 'stop';
/** The reason a job's signal carries: its name makes `throw ctx.signal.reason` read as an abort. */
class Stopped extends Error {
  constructor(readonly why: Why) {
    super(`job stopped: ${why}`);
    this.name = 'AbortError';
  }
}

const pause = (ms: number, signal: AbortSignal) => Wakeable.sleep(ms, signal);

/**
 * A signal aborted when either is; `dispose()` unhooks it from both. (AbortSignal.any would keep a
 * registration per job on the worker-lifetime signal.)
 */
function linked(a: AbortSignal, b: AbortSignal): AbortSignal & { dispose(): void } {
  const c = new AbortController();
  const abort = () => c.abort();
  if (a.aborted || b.aborted) abort();
  a.addEventListener('abort', abort, { once: true });
  b.addEventListener('abort', abort, { once: true });
  return Object.assign(c.signal, {
    dispose() {
      a.removeEventListener('abort', abort);
      b.removeEventListener('abort', abort);
    },
  });
}

/** One job's heartbeats: every min(heartbeatMs, lease / 3), and soon after each progress report. */
function heartbeats(client: WorkerClient, job: ClaimedJob, every: number, controller: AbortController) {
  let detail: { text: string; fraction?: number | undefined } | undefined;
  let inFlight = false;
  let lastSent = 0;
  let soon: NodeJS.Timeout | undefined;
  let stopped = false;
  const beat = (): void => {
    if (stopped || inFlight) return;
    clearTimeout(soon);
    soon = undefined;
    inFlight = true;
    lastSent = Date.now();
    const d = detail;
    detail = undefined;
    const progress = d ? { stage: d.text, percent: d.fraction === undefined ? null : d.fraction * 100 } : undefined;
    client
      .heartbeat(job.uuid, job.lease_token, d?.text, progress)
      .then((r) => {
        if (r.cancel_requested) controller.abort(new Stopped('cancelled'));
      })
      .catch((err: unknown) => {
        // 409: someone else holds the job now; 401/403: this worker may no longer hold it.
        if (err instanceof WorkerHttpError && [401, 403, 409].includes(err.status))
          controller.abort(new Stopped('lost'));
        else if (d && !detail) detail = d; // transient: the next beat tries again (with the detail) while the lease lasts
      })
      .finally(() => {
        inFlight = false;
        if (detail) flushSoon();
      });
  };
  const flushSoon = (): void => {
    if (stopped || inFlight || soon) return;
    const gap = lastSent + PROGRESS_GAP_MS - Date.now();
    if (gap <= 0) beat();
    else soon = setTimeout(beat, gap);
  };
  const timer = setInterval(beat, every);
  return {
    progress(text: string, fraction?: number) {
      if (stopped || controller.signal.aborted) return;
      const f =
        typeof fraction === 'number' && Number.isFinite(fraction) ? Math.min(1, Math.max(0, fraction)) : undefined;
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-conversion -- JavaScript handlers may pass anything
      detail = { text: String(text).slice(0, 200), fraction: f };
      flushSoon();
    },
    stop() {
      stopped = true;
      clearInterval(timer);
      clearTimeout(soon);
    },
  };
}

type Outcome = { out: JobOutput } | { err: unknown };

/** The options runWorker checks at once (JavaScript callers have no types). */
function checkOptions(opts: RunWorkerOptions): void {
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- checked at run time too: JavaScript callers have no types
  if (!/^https?:\/\//.test(opts.url ?? ''))
    throw new TypeError("runWorker: url must be the service's http(s) base URL");
  if (!opts.token) throw new TypeError('runWorker: token is required (a worker token, mjw_…)');
  if (!Array.isArray(opts.jobTypes) || opts.jobTypes.length === 0)
    throw new TypeError('runWorker: jobTypes must name at least one declared job type');
  if (typeof opts.handle !== 'function') throw new TypeError('runWorker: handle(job, ctx) is required');
}

/** The job as the handler sees it: its media slots picked out of the input. */
function workerJob(job: ClaimedJob): WorkerJob {
  const media: WorkerJob['media'] = {};
  for (const s of SLOTS) if (Array.isArray(job.input[s])) media[s] = job.input[s] as string[];
  return { uuid: job.uuid, jobType: job.job_type, model: job.model, attempt: job.attempt, input: job.input, media };
}

/** One worker's claim loops, running jobs and stop. */
class WorkerRun {
  readonly client: WorkerClient;
  readonly log: NonNullable<RunWorkerOptions['log']>;
  readonly wait: number;
  /** One claim loop per slot; stopped by stop() or a fatal answer: no more claims. */
  readonly slots: Loop[];
  /** Aborted when a stop's grace is over: running handlers are aborted, retries end. */
  readonly graceOver = new AbortController();
  readonly running = new Map<string, AbortController>();
  fatal: Error | undefined;

  constructor(readonly opts: RunWorkerOptions) {
    this.client = new WorkerClient(opts.url, opts.token);
    this.log = opts.log ?? (() => {});
    this.wait = Math.min(30, Math.max(0, opts.waitSeconds ?? 30));
    this.slots = Array.from({ length: Math.max(1, Math.floor(opts.concurrency ?? 1)) }, () => this.slot());
  }

  /** Retries `call` on transient errors (backoff 100 ms doubling to 5 s) until it succeeds, fails for good, or `until` aborts. */
  async persist<T>(what: string, call: () => Promise<T>, until: AbortSignal, tries = Infinity): Promise<T> {
    const backoff = new Backoff(OUTAGE_BACKOFF);
    for (let n = 1; ; n++) {
      try {
        return await call();
      } catch (err) {
        if (!isTransient(err) || until.aborted || n >= tries) throw err;
        const ms = backoff.next();
        this.log(`${what} failed; retrying`, { error: (err as Error).message, retry_in_ms: ms });
        await pause(ms, until);
      }
    }
  }

  /** One slot's claim loop: a claim (a long poll) while the slot is free, then its job; a failed claim backs off. */
  private slot(): Loop {
    const backoff = new Backoff(OUTAGE_BACKOFF);
    const loop: Loop = new Loop({
      step: (signal) => this.claimAndRun(backoff, signal),
      failed: (err) => this.claimFailed(loop, backoff, err),
    });
    return loop;
  }

  /** Resolves when every slot's loop has ended (after its last job's handler returned). */
  start(): Promise<void> {
    for (const loop of this.slots) loop.start();
    return Promise.all(this.slots.map((loop) => loop.finished)).then(() => undefined);
  }

  /** No more claims: each slot's loop ends once its claim is abandoned or its job is over. */
  stopClaiming(): void {
    for (const loop of this.slots) void loop.stop();
  }

  private async claimAndRun(backoff: Backoff, signal: AbortSignal): Promise<number> {
    const claim = await this.client.claim(this.opts.jobTypes, this.wait, signal);
    backoff.reset();
    // With `waitSeconds: 0` an empty claim is not a long poll: pause before the next one.
    if (!claim) return this.wait === 0 ? IDLE_PAUSE_MS : 0;
    if (signal.aborted) {
      // The answer raced the stop: hand the job straight back.
      await this.release(claim.job);
      return 0;
    }
    await this.runJob(claim);
    return 0;
  }

  /** A claim failed: wait (a transient error), stop the worker (refused for good), or nothing (stopping). */
  private claimFailed(loop: Loop, backoff: Backoff, err: unknown): number {
    if (loop.stopping) return 0;
    if (!isTransient(err)) {
      this.fatal ??= err as Error;
      this.log('worker stopping: the service refused it', { error: (err as Error).message });
      this.stopClaiming();
      return 0;
    }
    const ms = backoff.next();
    this.log('claim failed; retrying', { error: (err as Error).message, retry_in_ms: ms });
    return ms;
  }

  async release(job: ClaimedJob): Promise<void> {
    try {
      await this.persist(
        'release',
        () => this.client.release(job.uuid, job.lease_token),
        AbortSignal.timeout(RELEASE_WITHIN_MS),
      );
      this.log('job released', { job_uuid: job.uuid });
    } catch (err) {
      this.log('could not hand the job back; its lease will expire', {
        job_uuid: job.uuid,
        error: (err as Error).message,
      });
    }
  }

  async runJob({ job, leaseMs }: Claim): Promise<void> {
    const controller = new AbortController();
    this.running.set(job.uuid, controller);
    const heart = heartbeats(this.client, job, heartbeatEveryMs(leaseMs, this.opts.heartbeatMs), controller);
    this.log('job started', { job_uuid: job.uuid, job_type: job.job_type, attempt: job.attempt });
    const handled = this.handle(job, controller, heart);
    try {
      await this.settle(job, controller, heart, handled);
    } finally {
      heart.stop();
      // The slot is free only once the handler has returned (a cancelled one may still be winding down).
      await handled;
      this.running.delete(job.uuid);
    }
  }

  /** Starts the handler; its result or error, never a rejection. */
  handle(job: ClaimedJob, controller: AbortController, heart: Heartbeats): Promise<Outcome> {
    const ctx: JobContext = {
      signal: controller.signal,
      progress: (a: string | number, b?: string | number) =>
        typeof a === 'number'
          ? heart.progress(typeof b === 'string' ? b : 'processing', a / 100)
          : heart.progress(a, typeof b === 'number' ? b : undefined),
      download: (url) =>
        this.persist('download', () => this.client.download(url, controller.signal), controller.signal, DOWNLOAD_TRIES),
    };
    try {
      return Promise.resolve(this.opts.handle(workerJob(job), ctx)).then(
        (out) => ({ out }),
        (err: unknown) => ({ err }),
      );
    } catch (err) {
      return Promise.resolve({ err });
    }
  }

  /** Hands the job back, drops it, or records its outcome, by why its signal aborted (if it did). */
  async settle(job: ClaimedJob, controller: AbortController, heart: Heartbeats, handled: Promise<Outcome>) {
    const why = (): Why | undefined =>
      controller.signal.reason instanceof Stopped ? controller.signal.reason.why : undefined;
    // A stop after the grace hands the job back at once, without waiting for the handler to wind
    // down (it may take a while to notice its signal): the job is back in the queue meanwhile.
    const stopped = new Promise<'stopped'>((resolve) => {
      const on = () => why() === 'stop' && resolve('stopped');
      controller.signal.addEventListener('abort', on, { once: true });
    });
    const outcome = await Promise.race([handled, stopped]);
    const reason = why();
    // A result that made it before the stop is still delivered (one try, no retries).
    if (outcome === 'stopped' || (reason === 'stop' && 'err' in outcome)) {
      heart.stop();
      await this.release(job);
      return;
    }
    if (reason === 'cancelled' || reason === 'lost') {
      heart.stop();
      this.log('job dropped', { job_uuid: job.uuid, why: reason });
      return;
    }
    await this.record(job, controller, heart, outcome);
  }

  /**
   * Records the outcome: heartbeats go on (a large upload may outlast the lease), retries go on
   * until the outcome is recorded, the lease is lost (409) or a stop's grace is over.
   */
  async record(job: ClaimedJob, controller: AbortController, heart: Heartbeats, outcome: Outcome): Promise<void> {
    const until = linked(controller.signal, this.graceOver.signal);
    try {
      if ('err' in outcome) await this.failWith(job, outcome.err, until);
      else await this.deliver(job, outcome.out, until);
    } catch (err) {
      if (err instanceof WorkerHttpError && err.status === 409)
        this.log('job dropped', { job_uuid: job.uuid, why: 'lost', error: err.message });
      else
        this.log('could not record the job outcome; its lease will expire and another attempt will run it', {
          job_uuid: job.uuid,
          error: (err as Error).message,
        });
    } finally {
      heart.stop();
      until.dispose();
    }
  }

  async deliver(j: ClaimedJob, out: JobOutput, until: AbortSignal): Promise<void> {
    const lease = j.lease_token;
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- a JavaScript handler may return nothing
    const bytes = out?.bytes;
    if (!(bytes instanceof Uint8Array) || bytes.length === 0 || typeof out.contentType !== 'string') {
      return this.failWith(j, new WorkerJobError('processing_error', 'the worker produced no output'), until);
    }
    try {
      await this.persist('output upload', () => this.client.output(j.uuid, lease, bytes, out.contentType), until);
    } catch (err) {
      // Bytes the service will never take (too large, an unknown type): the job fails with its reason.
      if (err instanceof WorkerHttpError && [400, 413, 415].includes(err.status)) {
        return this.failWith(
          j,
          new WorkerJobError(
            'processing_error',
            `the service refused the output: ${err.message.replace(/^.*?HTTP \d+: /, '')}`,
          ),
          until,
        );
      }
      throw err;
    }
    await this.persist('complete', () => this.client.complete(j.uuid, lease), until);
    this.log('job completed', { job_uuid: j.uuid, bytes: bytes.length });
  }

  async failWith(j: ClaimedJob, err: unknown, until: AbortSignal): Promise<void> {
    const e =
      err instanceof WorkerJobError
        ? err
        : new WorkerJobError(
            'processing_error',
            (err instanceof Error ? err.message : String(err)) || 'the job failed',
          );
    const r = await this.persist(
      'fail',
      () => this.client.fail(j.uuid, j.lease_token, e.errorType, e.message, e.retryable),
      until,
    );
    this.log('job failed', {
      job_uuid: j.uuid,
      error_type: e.errorType,
      error: e.message.slice(0, 200),
      now: r.status,
    });
  }

  async stop(done: Promise<void>, graceMs: number): Promise<void> {
    this.stopClaiming();
    const deadline = Date.now() + Math.max(0, graceMs);
    while (this.running.size > 0 && Date.now() < deadline && !this.graceOver.signal.aborted)
      await pause(Math.min(50, deadline - Date.now()), this.graceOver.signal);
    this.graceOver.abort();
    for (const c of this.running.values()) c.abort(new Stopped('stop'));
    await done.catch(() => {});
  }
}

type Heartbeats = ReturnType<typeof heartbeats>;

/**
 * Runs a remote worker: `concurrency` loops, each long-polling for a job while its slot is free,
 * running `handle` with heartbeats, then uploading its output and completing (or failing) the job.
 * Network errors and 5xx answers back off and retry forever; 401/403 on a claim stop the worker
 * (`done` rejects); a 409 drops the job (it is no longer this worker's).
 */
export function runWorker(opts: RunWorkerOptions): RemoteWorker {
  checkOptions(opts);
  const worker = new WorkerRun(opts);
  // Each loop ends only after its job's handler has returned: when they all have, nothing runs.
  const done = worker.start().then(() => {
    if (worker.fatal) throw worker.fatal;
  });
  done.catch(() => {}); // observed through `done` by the caller; never an unhandled rejection here
  return {
    done,
    get active() {
      return worker.running.size;
    },
    stop: (graceMs = 30_000) => worker.stop(done, graceMs),
  };
}
