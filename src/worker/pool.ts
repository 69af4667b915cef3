import os from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import { heartbeatEveryMs } from '../contract/worker.js';
import { JobError } from '../errors.js';
import type { Held, JobLifecycle } from '../jobs/lifecycle.js';
import type { JobRow } from '../jobs/view.js';
import { createGuardedAgent, type IsPublic, type LookupAll } from '../media/index.js';
import { formatDuration } from '../media/net-errors.js';
import type { Catalogue } from '../processors/catalogue.js';
import { type ProgressAt } from '../processors/types.js';
import { SLOT_NAMES } from '../contract/api.js';
import { toProgress } from '../jobs/progress.js';
import { fetchInputs, hasMedia } from './inputs.js';
import type { Signals } from '../signals.js';
import type { StorageHealth } from '../storage/health.js';
import type { ResultStore } from '../storage/types.js';
import { storeResult } from './store-result.js';
import type { Store } from '../store/store.js';
import { DATABASE, isDatabaseUnavailable } from '../store/errors.js';
import { Backoff } from '../runtime/backoff.js';
import { Loop } from '../runtime/loop.js';
import { OutageBackoff } from '../runtime/outage.js';
import { Wakeable } from '../runtime/wake.js';

export interface WorkerPoolDeps {
  store: Store;
  lifecycle: JobLifecycle;
  catalogue: Catalogue;
  config: Config;
  clock: Clock;
  results: ResultStore;
  /** Told of every upload's outcome; /readyz reads it. */
  storageHealth: StorageHealth;
  signals: Signals;
  log: Logger;
  /** Test seams for the media address rule (real fetching, injected DNS). */
  lookup?: LookupAll;
  isPublic?: IsPublic;
}

/** Why a running job's AbortSignal fired; decides what happens to the job. */
class Stop extends Error {
  constructor(readonly why: 'cancelled' | 'lease-lost' | 'timeout' | 'shutdown') {
    super(`job stopped: ${why}`);
    this.name = 'AbortError';
  }
}

interface Running {
  controller: AbortController;
  done: Promise<void>;
}

const CLAIM_COALESCE_MS = 5;
/** Progress within one stage is written at most this often (a lease renewal each). */
const PROGRESS_WRITE_MS = 500;
const MAX_COALESCE_MS = 50;

/**
 * In-process workers: one claim loop fills WORKER_CONCURRENCY slots, taking as many jobs per
 * claim (one statement) as there are free slots; each job keeps its lease alive while it runs
 * and is finished only if it is still its own. A job whose worker died goes back to the queue
 * when its lease runs out (background/housekeeping.ts, in every process).
 */
export class WorkerPool {
  readonly id = `${os.hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  private readonly running = new Map<string, Running>();
  private readonly loop = new Loop({
    step: (signal) => this.claimStep(signal),
    failed: (err) => this.backoff.failed(err),
  });
  private claims = 0;
  /** Woken by a submit (any process), a cancel's free slot, a finished job, or stop. */
  private readonly backoff: OutageBackoff;
  /** Claims coalesce: 5 ms doubling per empty claim in a row, at most 50 ms (see claimStep). */
  private emptyClaims = 0;
  private readonly coalesce = new Backoff({ firstMs: CLAIM_COALESCE_MS, maxMs: MAX_COALESCE_MS });
  private readonly jobTypes: string[];
  private readonly dispatcher: Dispatcher;
  private readonly onQueued = () => {
    if (this.running.size < this.deps.config.workerConcurrency) this.loop.wake.wake();
  };
  private readonly onCancelled = (uuid: string) => this.running.get(uuid)?.controller.abort(new Stop('cancelled'));

  constructor(private readonly deps: WorkerPoolDeps) {
    this.dispatcher = createGuardedAgent({
      allowPrivate: deps.config.mediaAllowPrivateNetworks,
      lookup: deps.lookup,
      isPublic: deps.isPublic,
    });
    // Declared (remote) types are served by remote workers over HTTP, never in process.
    this.backoff = new OutageBackoff({
      log: deps.log,
      who: 'workers',
      dependency: DATABASE,
      otherMs: deps.config.queuePollIntervalMs,
    });
    this.jobTypes = deps.catalogue
      .list()
      .filter((t) => !t.remote)
      .map((t) => t.name);
  }

  start(): void {
    this.deps.signals.on('job-queued', this.onQueued);
    this.deps.signals.on('job-cancelled', this.onCancelled);
    if (this.jobTypes.length > 0) this.loop.start();
  }

  /** Stops claiming, lets running jobs finish for up to `graceMs`, then hands the rest back. */
  async stop(graceMs = 10_000): Promise<void> {
    await this.loop.stop();
    const all = Promise.all([...this.running.values()].map((r) => r.done));
    const graceOver = new AbortController();
    await Promise.race([all, Wakeable.sleep(graceMs, graceOver.signal)]);
    graceOver.abort(); // no timer left behind once the jobs are done
    for (const r of this.running.values()) r.controller.abort(new Stop('shutdown'));
    await all;
    await this.deps.lifecycle.drain();
    this.deps.signals.off('job-queued', this.onQueued);
    this.deps.signals.off('job-cancelled', this.onCancelled);
    await this.dispatcher.close();
  }

  get activeJobs(): number {
    return this.running.size;
  }

  /** One claim for the free slots; a claim that came back short waits for work, then coalesces. */
  private async claimStep(signal: AbortSignal): Promise<number> {
    const { config, lifecycle } = this.deps;
    this.loop.wake.clear(); // the claim below looks anyway
    const free = config.workerConcurrency - this.running.size;
    // A finishing job wakes the loop; the timeout is only a backstop.
    if (free <= 0) return config.queuePollIntervalMs;
    const claimedAt = performance.now();
    // A lease token per claim, not per process: if this process ever re-claims its own job
    // (a lease that lapsed under load), the older attempt can no longer finish it.
    const jobs = await lifecycle.claim({
      leaseOwner: `${this.id}/${++this.claims}`,
      jobTypes: this.jobTypes,
      limit: free,
    });
    this.backoff.succeeded();
    for (const job of jobs) this.launch(job);
    // A full claim may have left more behind: go again at once if slots are free.
    if (jobs.length >= free) return 0;
    await this.loop.wake.wait(config.queuePollIntervalMs, signal); // stop() wakes it
    // Every submit wakes every worker process. Under a stream of submits, claim at most every
    // CLAIM_COALESCE_MS: one claim then takes what arrived meanwhile, instead of one (mostly
    // empty, contended) claim per submit per process. An idle queue's first job is not delayed.
    // A process whose claims keep coming back empty (other processes took the work) waits
    // longer, up to 50 ms, so the processes that are getting jobs carry the stream.
    this.emptyClaims = jobs.length === 0 ? this.emptyClaims + 1 : 0;
    const gap = this.coalesce.delay(this.emptyClaims);
    await Wakeable.sleep(gap - (performance.now() - claimedAt), signal);
    return 0;
  }

  private launch(job: JobRow): void {
    const controller = new AbortController();
    const done = this.execute(job, controller)
      .catch((err: unknown) => this.deps.log.error({ err, job_uuid: job.uuid }, 'job bookkeeping failed'))
      .finally(() => {
        this.running.delete(job.uuid);
        this.loop.wake.wake();
      });
    this.running.set(job.uuid, { controller, done });
  }

  private async execute(job: JobRow, controller: AbortController): Promise<void> {
    const { config, clock, log, lifecycle } = this.deps;
    const jlog = log.child({ job_uuid: job.uuid, job_type: job.job_type });
    const signal = controller.signal;
    const startedAt = clock.now();
    const held: Held = { uuid: job.uuid, lease: job.lease_owner!, job_type: job.job_type, startedAt };
    jlog.info({ attempt: job.attempts }, 'job started');
    const upkeep = new LeaseUpkeep(lifecycle, held, controller, jlog, heartbeatEveryMs(config.jobLeaseMs));
    const timeout = setTimeout(() => controller.abort(new Stop('timeout')), config.jobTimeoutMs);
    const run: Attempt = { job, held, signal, upkeep, jlog, startedAt, storageDown: false };
    try {
      await this.runAndFinish(run);
    } catch (err) {
      await upkeep.settled();
      await this.finishFailed(run, err);
    } finally {
      upkeep.stop();
      clearTimeout(timeout);
    }
  }

  /** Downloads the media, runs the job type, stores the result and completes the job if still ours. */
  private async runAndFinish(run: Attempt): Promise<void> {
    const { config, clock, results, lifecycle } = this.deps;
    const { job, held, signal, upkeep, jlog } = run;
    const type = this.deps.catalogue.get(job.job_type);
    if (!type) throw new JobError('internal_error', `job type ${job.job_type} is not available on this worker`);
    const input = JSON.parse(job.input) as Record<string, unknown>;
    const progress = (stage: string, at?: ProgressAt) => {
      upkeep.report(stage, at ?? { percent: type.stages?.[stage] ?? null });
    };
    if (hasMedia(type, input)) progress('downloading media');
    const media = await fetchInputs(type, input, {
      config,
      signal,
      dispatcher: this.dispatcher,
      lookup: this.deps.lookup,
      isPublic: this.deps.isPublic,
    });
    const options = Object.fromEntries(
      Object.entries(input).filter(([k]) => !(SLOT_NAMES as readonly string[]).includes(k)),
    );
    const out = await type.run({ model: job.model, options, media, signal, progress });
    signal.throwIfAborted();

    const key = `${job.uuid}.${job.attempts}.${out.extension}`;
    await storeResult(key, out, {
      results,
      health: this.deps.storageHealth,
      signal,
      onWait: () => {
        run.storageDown = true; // a timeout then says so
        progress('waiting for result storage');
      },
    });
    await upkeep.settled();
    const row = await lifecycle.complete(held, { key, contentType: out.contentType, size: out.bytes.length });
    if (!row) {
      // Cancelled (or taken over) while we stored: the late result is discarded.
      await results.delete(key);
      jlog.info('job result discarded: the job is no longer ours');
    } else {
      jlog.info({ duration_ms: clock.now() - run.startedAt, size_bytes: out.bytes.length }, 'job completed');
    }
  }

  /** Ends an attempt that threw, by why its signal fired (if it did) or by its error. */
  private async finishFailed({ held, signal, jlog, storageDown }: Attempt, err: unknown): Promise<void> {
    const { config, lifecycle } = this.deps;
    const why = signal.aborted && signal.reason instanceof Stop ? signal.reason.why : undefined;
    if (why === 'cancelled' || why === 'lease-lost') {
      jlog.info({ why }, 'job stopped');
    } else if (why === 'shutdown') {
      // Handed back; this attempt does not count against JOB_MAX_ATTEMPTS.
      await lifecycle.handBack(held, 'handed back at shutdown');
      jlog.info('job handed back at shutdown');
    } else if (why === 'timeout') {
      await lifecycle.fail(held, {
        errorType: 'timeout',
        message: `job ran longer than the ${formatDuration(config.jobTimeoutMs)} limit${storageDown ? ' (the result storage was unavailable)' : ''}`,
        detail: 'timed out',
      });
      jlog.warn('job timed out');
    } else if (err instanceof JobError) {
      await lifecycle.fail(held, { errorType: err.errorType, message: err.message });
      jlog.info({ error_type: err.errorType, error_message: err.message }, 'job failed');
    } else {
      await lifecycle.fail(held, { errorType: 'internal_error', message: 'internal error while processing the job' });
      jlog.error({ err }, 'job failed with an unexpected error');
    }
  }
}

/** One attempt of a job in this pool. */
interface Attempt {
  job: JobRow;
  held: Held;
  signal: AbortSignal;
  upkeep: LeaseUpkeep;
  jlog: Logger;
  startedAt: number;
  /** Set while the result waits for the storage: a timeout then says so. */
  storageDown: boolean;
}

/**
 * A running job's lease upkeep: a renewal every heartbeat, carrying the latest progress. It doubles
 * as the cross-process cancel check: a failed renewal means the job is no longer ours (cancelled,
 * or our lease lapsed and another worker took it).
 */
class LeaseUpkeep {
  private pending: ReturnType<typeof toProgress> | undefined;
  private renewing: Promise<void> = Promise.resolve();
  private lastWrite = -Infinity;
  private lastStage: string | undefined;
  private flush: NodeJS.Timeout | undefined;
  private readonly heartbeat: NodeJS.Timeout;

  constructor(
    private readonly lifecycle: JobLifecycle,
    private readonly held: Held,
    private readonly controller: AbortController,
    private readonly jlog: Logger,
    everyMs: number,
  ) {
    this.heartbeat = setInterval(() => {
      this.renew();
    }, everyMs);
  }

  /** A new stage is written at once; reports within a stage (every frame) at most every 500 ms. */
  report(stage: string, at: ProgressAt): void {
    if (this.controller.signal.aborted) return;
    this.pending = toProgress(stage, at);
    const since = performance.now() - this.lastWrite;
    if (stage !== this.lastStage || since >= PROGRESS_WRITE_MS) {
      this.lastStage = stage;
      clearTimeout(this.flush);
      this.flush = undefined;
      this.renew();
    } else {
      this.flush ??= setTimeout(() => {
        this.flush = undefined;
        if (this.pending && !this.controller.signal.aborted) this.renew();
      }, PROGRESS_WRITE_MS - since);
    }
  }

  /** Resolves when the renewals sent so far have returned. */
  settled(): Promise<void> {
    return this.renewing;
  }

  stop(): void {
    clearInterval(this.heartbeat);
    clearTimeout(this.flush);
  }

  private renew(): void {
    const { controller, lifecycle, held } = this;
    const p = this.pending;
    this.pending = undefined;
    this.lastWrite = performance.now();
    this.renewing = this.renewing
      .then(() => lifecycle.progress(held, p?.detail, p?.progress))
      .then((ours) => {
        if (!ours && !controller.signal.aborted) controller.abort(new Stop('cancelled'));
      })
      .catch((err: unknown) => {
        if (!isDatabaseUnavailable(err)) this.jlog.warn({ err }, 'lease renewal failed');
      });
  }
}
