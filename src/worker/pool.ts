import os from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import { JobError } from '../jobs/errors.js';
import type { JobRow } from '../jobs/view.js';
import { createGuardedAgent, fetchMedia, type IsPublic, type LookupAll } from '../media/index.js';
import { formatDuration } from '../media/net-errors.js';
import type { Catalogue } from '../processors/catalogue.js';
import { SLOT_NAMES, type FetchedMedia, type JobType, type SlotName } from '../processors/types.js';
import type { Metrics } from '../metrics.js';
import type { Signals } from '../signals.js';
import type { ResultStore } from '../storage/types.js';
import type { Store } from '../store/db.js';
import { claimNext, renewLease, transition } from '../store/jobs.js';

export interface WorkerPoolDeps {
  store: Store;
  catalogue: Catalogue;
  config: Config;
  clock: Clock;
  results: ResultStore;
  signals: Signals;
  log: Logger;
  metrics?: Metrics;
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


/**
 * In-process workers: WORKER_CONCURRENCY loops that claim a job under a lease, keep the lease
 * alive while it runs, and finish it only if it is still theirs. A job whose worker died is
 * claimed again when its lease runs out; JOB_MAX_ATTEMPTS bounds how often.
 */
export class WorkerPool {
  readonly id = `${os.hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  private readonly running = new Map<string, Running>();
  private readonly loops: Promise<void>[] = [];
  private stopping = false;
  private claims = 0;
  private readonly sleepers = new Set<() => void>();
  private readonly dispatcher: Dispatcher;
  private readonly onQueued = () => this.wakeOne();
  private readonly onCancelled = (uuid: string) => this.running.get(uuid)?.controller.abort(new Stop('cancelled'));

  constructor(private readonly deps: WorkerPoolDeps) {
    this.dispatcher = createGuardedAgent({
      allowPrivate: deps.config.mediaAllowPrivateNetworks,
      lookup: deps.lookup,
      isPublic: deps.isPublic,
    });
  }

  start(): void {
    this.deps.signals.on('job-queued', this.onQueued);
    this.deps.signals.on('job-cancelled', this.onCancelled);
    for (let i = 0; i < this.deps.config.workerConcurrency; i++) this.loops.push(this.loop());
  }

  /** Stops claiming, lets running jobs finish for up to `graceMs`, then hands the rest back. */
  async stop(graceMs = 10_000): Promise<void> {
    this.stopping = true;
    this.wakeAll();
    const all = Promise.all(this.loops);
    const grace = new Promise<void>((r) => setTimeout(r, graceMs).unref());
    await Promise.race([all, grace]);
    for (const r of this.running.values()) r.controller.abort(new Stop('shutdown'));
    await all;
    this.deps.signals.off('job-queued', this.onQueued);
    this.deps.signals.off('job-cancelled', this.onCancelled);
    await this.dispatcher.close();
  }

  get activeJobs(): number {
    return this.running.size;
  }

  private wakeAll(): void {
    for (const wake of [...this.sleepers]) wake();
  }

  /**
   * Wakes one idle slot, not all: a submit then costs one claim per process instead of one per
   * slot (no thundering herd); a slot that finds work wakes the next, so a burst still fans out.
   */
  private wakeOne(): void {
    const first = this.sleepers.values().next();
    if (!first.done) first.value();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.sleepers.delete(done);
        resolve();
      };
      const t = setTimeout(done, ms);
      this.sleepers.add(done);
    });
  }

  private async loop(): Promise<void> {
    const { store, config, clock, log } = this.deps;
    while (!this.stopping) {
      let job: JobRow | undefined;
      try {
        // A lease token per claim, not per process: if this process ever re-claims its own job
        // (a lease that lapsed under load), the older attempt can no longer finish it.
        job = await claimNext(store.db, store.dialect, {
          workerId: `${this.id}/${++this.claims}`,
          leaseMs: config.jobLeaseMs,
          maxAttempts: config.jobMaxAttempts,
          now: clock.now(),
        });
      } catch (err) {
        log.error({ err }, 'claiming a job failed');
        await this.sleep(config.queuePollIntervalMs);
        continue;
      }
      if (!job) {
        await this.sleep(config.queuePollIntervalMs);
        continue;
      }
      this.wakeOne();
      const controller = new AbortController();
      const done = this.execute(job, controller).catch((err) => log.error({ err, job_uuid: job.uuid }, 'job bookkeeping failed'));
      this.running.set(job.uuid, { controller, done });
      await done;
      this.running.delete(job.uuid);
    }
  }

  private async execute(job: JobRow, controller: AbortController): Promise<void> {
    const { store, config, clock, log, results, signals } = this.deps;
    const jlog = log.child({ job_uuid: job.uuid, job_type: job.job_type });
    const signal = controller.signal;
    const lease = job.lease_owner!;
    jlog.info({ attempt: job.attempts }, 'job started');
    const startedAt = clock.now();

    // Lease upkeep doubles as the cross-process cancel check: a failed renewal means the job
    // is no longer ours (cancelled, or our lease lapsed and another worker took it).
    let detail: string | undefined;
    let renewing: Promise<void> = Promise.resolve();
    const renew = () => {
      const d = detail;
      detail = undefined;
      renewing = renewing
        .then(() => renewLease(store.db, job.uuid, lease, clock.now() + config.jobLeaseMs, d))
        .then((ours) => {
          if (!ours && !signal.aborted) controller.abort(new Stop('cancelled'));
        })
        .catch((err) => jlog.warn({ err }, 'lease renewal failed'));
    };
    const heartbeat = setInterval(renew, Math.max(200, Math.floor(config.jobLeaseMs / 3)));
    const timeout = setTimeout(() => controller.abort(new Stop('timeout')), config.jobTimeoutMs);

    const finish = async (to: 'completed' | 'failed' | 'queued', set: Parameters<typeof transition>[2]['set']) => {
      await renewing;
      const row = await transition(store.db, job.uuid, {
        from: ['processing'],
        to,
        leaseOwner: lease,
        now: clock.now(),
        set,
        firstWebhookDelayMs: config.webhookRetryScheduleMs[0],
      });
      if (row && to !== 'queued') {
        signals.jobFinished(job.uuid);
        this.deps.metrics?.jobsFinished.inc({ job_type: job.job_type, status: to });
        this.deps.metrics?.processingSeconds.observe({ job_type: job.job_type, status: to }, (clock.now() - startedAt) / 1000);
      }
      return row;
    };

    try {
      const type = this.deps.catalogue.get(job.job_type);
      if (!type) throw new JobError('internal_error', `job type ${job.job_type} is not available on this worker`);
      const input = JSON.parse(job.input) as Record<string, unknown>;
      const progress = (d: string) => {
        if (signal.aborted) return;
        detail = d;
        renew();
      };
      const media = await this.download(type, input, signal, progress);
      const options = Object.fromEntries(Object.entries(input).filter(([k]) => !(SLOT_NAMES as readonly string[]).includes(k)));
      const out = await type.run({ model: job.model, options, media, signal, progress });
      signal.throwIfAborted();

      const key = `${job.uuid}.${job.attempts}.${out.extension}`;
      await results.put(key, out.bytes, out.contentType);
      const row = await finish('completed', {
        status_detail: 'done',
        result_key: key,
        result_content_type: out.contentType,
        result_size: out.bytes.length,
      });
      if (!row) {
        // Cancelled (or taken over) while we stored: the late result is discarded.
        await results.delete(key);
        jlog.info('job result discarded: the job is no longer ours');
      } else {
        jlog.info({ duration_ms: clock.now() - startedAt, size_bytes: out.bytes.length }, 'job completed');
      }
    } catch (err) {
      const why = signal.aborted && signal.reason instanceof Stop ? signal.reason.why : undefined;
      if (why === 'cancelled' || why === 'lease-lost') {
        jlog.info({ why }, 'job stopped');
      } else if (why === 'shutdown') {
        // Handed back; this attempt does not count against JOB_MAX_ATTEMPTS.
        await finish('queued', { status_detail: 'waiting for a worker (handed back at shutdown)', lease_owner: null, lease_expires_at: null, attempts: Math.max(0, job.attempts - 1) });
        jlog.info('job handed back at shutdown');
      } else if (why === 'timeout') {
        await finish('failed', {
          status_detail: 'timed out',
          error_type: 'timeout',
          error_message: `job ran longer than the ${formatDuration(config.jobTimeoutMs)} limit`,
        });
        jlog.warn('job timed out');
      } else if (err instanceof JobError) {
        await finish('failed', { status_detail: 'failed', error_type: err.errorType, error_message: err.message });
        jlog.info({ error_type: err.errorType, error_message: err.message }, 'job failed');
      } else {
        await finish('failed', { status_detail: 'failed', error_type: 'internal_error', error_message: 'internal error while processing the job' });
        jlog.error({ err }, 'job failed with an unexpected error');
      }
    } finally {
      clearInterval(heartbeat);
      clearTimeout(timeout);
    }
  }

  /** Downloads every filled slot, checking each file is the kind of media the slot accepts. */
  private async download(
    type: JobType,
    input: Record<string, unknown>,
    signal: AbortSignal,
    progress: (d: string) => void,
  ): Promise<Partial<Record<SlotName, FetchedMedia[]>>> {
    const { config } = this.deps;
    const jobs: Array<Promise<[SlotName, number, FetchedMedia]>> = [];
    for (const slot of SLOT_NAMES) {
      const spec = type.slots[slot];
      const urls = input[slot] as string[] | undefined;
      if (!spec || !urls) continue;
      urls.forEach((url, i) => {
        const field = urls.length > 1 ? `input.${slot}[${i}]` : `input.${slot}`;
        jobs.push(
          fetchMedia(url, {
            allowPrivate: config.mediaAllowPrivateNetworks,
            maxBytes: config.maxMediaBytes,
            timeoutMs: config.mediaFetchTimeoutMs,
            signal,
            lookup: this.deps.lookup,
            isPublic: this.deps.isPublic,
            dispatcher: this.dispatcher,
          }).then(
            (m) => {
              if (!m.mime?.startsWith(`${spec.accepts}/`)) {
                throw new JobError('invalid_media', `${field}: not ${spec.accepts === 'image' ? 'an' : 'a'} ${spec.accepts} file (detected ${m.mime ?? 'unknown data'})`);
              }
              return [slot, i, m] as [SlotName, number, FetchedMedia];
            },
            (err: unknown) => {
              if (err instanceof JobError) throw new JobError(err.errorType, `${field}: ${err.message}`);
              throw err;
            },
          ),
        );
      });
    }
    if (jobs.length > 0) progress('downloading media');
    const media: Partial<Record<SlotName, FetchedMedia[]>> = {};
    for (const [slot, i, m] of await Promise.all(jobs)) (media[slot] ??= [])[i] = m;
    return media;
  }
}
