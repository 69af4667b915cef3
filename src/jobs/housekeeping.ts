import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import { Loop } from '../runtime/loop.js';
import { OutageBackoff } from '../runtime/outage.js';
import type { ResultStore } from '../storage/types.js';
import type { Store } from '../store/store.js';
import { purgeIdempotencyKeys } from '../store/idempotency.js';
import { countActive, expiredResults, refreshPlannerStats } from '../store/jobs.js';
import { DATABASE } from '../store/errors.js';
import type { JobLifecycle } from './lifecycle.js';
import { purgeJob } from './purge.js';

export interface HousekeepingDeps {
  store: Store;
  config: Config;
  clock: Clock;
  results: ResultStore;
  lifecycle: JobLifecycle;
  /** Deletes the staged blobs of ended remote attempts (RemoteWork.sweep). */
  sweepStaged(): Promise<number>;
  log: Logger;
}

/** Staged blobs of ended attempts are swept this often. */
const SWEEP_EVERY_MS = 30_000;
/** Deadlines (cancel_after) and due purges are looked at this often: "within about a second". */
const DEADLINE_EVERY_MS = 1_000;

/**
 * The one housekeeping loop of a process, in every role (safe to run in every process at once):
 * - every second: active jobs whose deadline passed are cancelled, and finished jobs whose purge
 *   is due (their retention ended, or a DELETE's blob deletion failed) are purged; both are index
 *   ranges over due rows only (jobs_deadlines, jobs_purges), free when nothing is due;
 * - every tick (JOB_LEASE/4, between 200 ms and 5 s): jobs whose lease expired go back to the
 *   queue or fail (an index range over expired leases: free while every worker is alive), and the
 *   planner statistics are refreshed when the queue has doubled (one read of the counters);
 * - every 30 s: staged blobs of ended remote attempts are deleted;
 * - every MAINTENANCE_INTERVAL: jobs whose result outlived RESULT_RETENTION (finished before it
 *   was shortened, or before migration 009) are purged, and expired idempotency keys deleted.
 * A database outage backs off quietly (OutageBackoff: one warning per outage); other errors are logged.
 */
export class Housekeeping {
  readonly tickMs: number;
  private readonly backoff: OutageBackoff;
  private readonly loop: Loop;
  private lastSweep = -Infinity;
  private lastTick = -Infinity;
  private lastMaintenance = -Infinity;
  /** Queued jobs at the last planner-statistics refresh. */
  private analyzedAt = 0;

  constructor(private readonly deps: HousekeepingDeps) {
    this.tickMs = Math.min(5_000, Math.max(200, Math.floor(deps.config.jobLeaseMs / 4)));
    this.backoff = new OutageBackoff({
      log: deps.log,
      who: 'housekeeping (lease recovery, retention, sweeps)',
      dependency: DATABASE,
    });
    const everyMs = Math.min(this.tickMs, DEADLINE_EVERY_MS);
    this.loop = new Loop({
      step: async () => {
        await this.tick(false);
        this.backoff.succeeded();
        return everyMs;
      },
      failed: (err) => Math.max(everyMs, this.backoff.failed(err)),
    });
  }

  start(): void {
    this.loop.start();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
  }

  /** Runs every step now, whatever their cadence (tests, and the first tick). */
  async runOnce(): Promise<void> {
    await this.tick(true);
  }

  private async tick(all: boolean): Promise<void> {
    const { lifecycle } = this.deps;
    // Intervals of real time (monotonic): tests move the service clock by days.
    const t = performance.now();
    await lifecycle.expireDeadlines();
    await this.purgeDue();
    if (all || t - this.lastTick >= this.tickMs) {
      await lifecycle.recoverExpired();
      await this.tunePlanner();
      this.lastTick = t;
    }
    if (all || t - this.lastSweep >= SWEEP_EVERY_MS) {
      await this.deps.sweepStaged();
      this.lastSweep = t;
    }
    if (all || t - this.lastMaintenance >= this.deps.config.maintenanceIntervalMs) {
      await this.maintain();
      this.lastMaintenance = t;
    }
  }

  /** Purges that are due; one whose storage fails stays due and is retried on a later tick. */
  private async purgeDue(): Promise<void> {
    const { lifecycle, log } = this.deps;
    for (const { uuid } of await lifecycle.duePurges()) {
      try {
        await purgeJob(this.deps, uuid);
      } catch (err) {
        log.warn({ err, job_uuid: uuid }, 'purge failed (the job stays due and is retried)');
        throw err; // a storage or database outage: back off rather than try every due job now
      }
    }
  }

  /** Results past RESULT_RETENTION are purged (their result then answers 410); expired idempotency keys deleted. */
  private async maintain(): Promise<void> {
    const { store, config, clock, log } = this.deps;
    const now = clock.now();
    const purged = await purgeIdempotencyKeys(store.db, now);
    if (purged > 0) log.info({ purged }, 'purged expired idempotency keys');
    for (const r of await expiredResults(store.db, now - config.resultRetentionMs)) {
      await purgeJob(this.deps, r.uuid);
    }
  }

  /**
   * Keeps PostgreSQL's planner statistics in step with the queue: when the number of queued jobs
   * has grown past twice what it was at the last refresh (and past 1,000), analyze the jobs table
   * now rather than when autovacuum gets to it (without statistics the planner may sort the whole
   * queue instead of seeking its partial index). One read of the counters otherwise.
   */
  private async tunePlanner(): Promise<void> {
    const { store, log } = this.deps;
    if (store.dialect !== 'postgres') return;
    const { queued } = await countActive(store.db);
    if (queued < 1000 || queued < 2 * this.analyzedAt) return;
    if (await refreshPlannerStats(store.db, store.dialect)) log.info({ queued }, 'refreshed planner statistics');
    this.analyzedAt = queued;
  }
}
