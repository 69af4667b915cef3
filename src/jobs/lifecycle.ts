import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import type { Metrics } from '../metrics.js';
import type { SignalName, Signals } from '../signals.js';
import type { Store } from '../store/db.js';
import { isDatabaseUnavailable } from '../store/errors.js';
import {
  claimByUuid,
  claimJobs,
  deferJobs,
  expiredLeases,
  countActive,
  insertJob,
  refreshPlannerStats,
  insertWebhookEvents,
  lockLimitedClaims,
  queueHead,
  renewLease,
  runningByOwner,
  updateState,
  type JobRow,
  type NewJob,
  type TransitionSpec,
} from '../store/jobs.js';
import type { Database } from '../store/schema.js';
import { terminalEvent } from '../webhooks/events.js';
import type { ErrorType } from './errors.js';
import { ACTIVE_STATUSES, assertTransitions, isTerminal, type TerminalStatus } from './states.js';

export interface LifecycleDeps {
  store: Store;
  clock: Clock;
  config: Config;
  signals: Signals;
  log: Logger;
  metrics?: Metrics;
}

type Signal = readonly [SignalName, string];

/** What a worker reports about the attempt it holds (`lease` is the claim's lease token). */
export interface Held {
  uuid: string;
  lease: string;
  job_type: string;
  /** When this attempt started (for the processing-time histogram). */
  startedAt?: number;
}

export interface ResultInfo {
  key: string;
  contentType: string;
  size: number;
}

export interface Failure {
  errorType: ErrorType;
  message: string;
  /** status_detail; default "failed". */
  detail?: string;
}

export interface ClaimRequest {
  /** Lease token for this claim (unique per claim: a re-claim never shares an older attempt's). */
  leaseOwner: string;
  jobTypes: readonly string[];
  limit: number;
}

/** How many queued jobs the limited claim looks at (OWNER_MAX_RUNNING): bounds its cost. */
const LIMITED_WINDOW = 200;
/** A finish that cannot be recorded (database down) is retried this long before the lease decides. */
const FINISH_RETRY_MS = 5 * 60_000;

interface PendingFinish {
  spec: TransitionSpec & { to: TerminalStatus | 'queued' };
  uuid: string;
  meta: Held;
  since: number;
  resolve(row: JobRow | undefined): void;
  reject(err: unknown): void;
}

/**
 * The one place a job changes state. Every change (create, claim, progress, complete, fail, hand
 * back, cancel, recover an expired lease, exhaust) is a conditional update here; a terminal one
 * also writes its webhook outbox row and its NOTIFY in the same transaction, then runs the one
 * "after terminal" step: local signals and metrics. Workers (in-process or remote) and the API
 * call these; nothing else updates a job's state.
 */
export class JobLifecycle {
  private readonly db: Kysely<Database>;
  private pending: PendingFinish[] = [];
  private flushing: Promise<void> | undefined;
  /** Queued jobs at the last planner-statistics refresh (see tunePlanner). */
  private analyzedAt = 0;
  private createdSinceTune = 0;

  constructor(private readonly deps: LifecycleDeps) {
    this.db = deps.store.db;
  }

  /**
   * Inserts a queued job; `within` runs first in the same transaction (the idempotency key's
   * reservation) and may veto the insert by returning false.
   */
  async create(row: NewJob, within?: (trx: Kysely<Database>) => Promise<boolean>): Promise<boolean> {
    const signals: Signal[] = [['job-queued', '']];
    const inline = within === undefined ? this.deps.signals.transport?.notifyExpression?.(signals) : undefined;
    if (inline) {
      await insertJob(this.db, row, inline);
      this.afterCreate(row, signals);
      return true;
    }
    const created = await this.atomically(within !== undefined || this.notifiesInTransaction, async (trx) => {
      if (within && !(await within(trx))) return false;
      await insertJob(trx, row);
      await this.deps.signals.publishWithin(trx, signals);
      return true;
    });
    if (created) this.afterCreate(row, signals);
    return created;
  }

  private afterCreate(row: NewJob, signals: Signal[]): void {
    this.deps.signals.deliverLocally(signals);
    this.deps.metrics?.jobsSubmitted.inc({ job_type: row.job_type });
    // An API process sees a burst first: check the planner statistics every 1,000 submits.
    if (++this.createdSinceTune >= 1000) {
      this.createdSinceTune = 0;
      this.tunePlanner().catch((err) => this.deps.log.warn({ err }, 'refreshing planner statistics failed'));
    }
  }

  /** Claims up to `limit` queued jobs of the given types (fair order; OWNER_MAX_RUNNING when set). */
  async claim(req: ClaimRequest): Promise<JobRow[]> {
    const { config, clock, store } = this.deps;
    const spec = { ...req, leaseMs: config.jobLeaseMs, now: clock.now() };
    const claimed =
      config.ownerMaxRunning === 0 ? await claimJobs(this.db, store.dialect, spec) : await this.claimLimited(req, spec);
    // Streams in this process see queued → processing at once (others by their poll).
    for (const job of claimed) this.deps.signals.deliver('job-progress', job.uuid);
    return claimed;
  }

  private claimLimited(req: ClaimRequest, spec: ClaimRequest & { leaseMs: number; now: number }): Promise<JobRow[]> {
    const { config, store } = this.deps;
    return this.db.transaction().execute(async (trx) => {
      await lockLimitedClaims(trx, store.dialect);
      const head = await queueHead(trx, req.jobTypes, LIMITED_WINDOW);
      const running = await runningByOwner(trx, [...new Set(head.map((h) => h.owner))]);
      const picked: string[] = [];
      const blocked: string[] = [];
      for (const h of head) {
        const n = running.get(h.owner) ?? 0;
        if (picked.length < req.limit && n < config.ownerMaxRunning) {
          picked.push(h.uuid);
          running.set(h.owner, n + 1);
        } else if (n >= config.ownerMaxRunning) blocked.push(h.uuid);
      }
      // An owner at its limit yields its place: its jobs in the window move behind it, so the
      // next claim's window holds other owners' jobs instead of the same blocked ones.
      if (picked.length < req.limit && blocked.length > 0 && head.length > 0) {
        await deferJobs(trx, blocked, Number(head[head.length - 1]!.vtime) + 1, spec.now);
      }
      return claimByUuid(trx, picked, spec);
    });
  }

  /** Renews the lease (and shows `detail`); false when the job is no longer this lease's. */
  async progress(held: Held, detail?: string): Promise<boolean> {
    return (await this.renew(held, detail)) !== undefined;
  }

  /** The same, answering the job's type while the lease holds (remote heartbeats check the type's timeout). */
  async renew(held: Held, detail?: string): Promise<string | undefined> {
    const { clock, config, signals } = this.deps;
    const jobType = await renewLease(this.db, held.uuid, held.lease, clock.now() + config.jobLeaseMs, detail);
    // Live event streams hear of a new detail at once (a plain lease renewal says nothing new).
    if (jobType !== undefined && detail !== undefined) signals.jobProgress(held.uuid);
    return jobType;
  }

  /** processing → completed, if this lease still holds the job; undefined otherwise. */
  complete(held: Held, result: ResultInfo): Promise<JobRow | undefined> {
    return this.finish(held, {
      from: ['processing'],
      to: 'completed',
      leaseOwner: held.lease,
      now: this.deps.clock.now(),
      set: {
        status_detail: 'done',
        result_key: result.key,
        result_content_type: result.contentType,
        result_size: result.size,
      },
    });
  }

  /** processing → failed, if this lease still holds the job. */
  fail(held: Held, failure: Failure): Promise<JobRow | undefined> {
    return this.finish(held, {
      from: ['processing'],
      to: 'failed',
      leaseOwner: held.lease,
      now: this.deps.clock.now(),
      set: { status_detail: failure.detail ?? 'failed', error_type: failure.errorType, error_message: failure.message },
    });
  }

  /** processing → queued after a failed attempt that may succeed on another (a remote worker's retryable failure). */
  retry(held: Held, detail: string): Promise<JobRow | undefined> {
    return this.finish(held, {
      from: ['processing'],
      to: 'queued',
      leaseOwner: held.lease,
      now: this.deps.clock.now(),
      set: { status_detail: detail, lease_owner: null, lease_expires_at: null },
    });
  }

  /** processing → queued (a worker stopping hands its job back; the attempt does not count). */
  handBack(
    held: Held,
    attempts: number,
    detail = 'waiting for a worker (handed back at shutdown)',
  ): Promise<JobRow | undefined> {
    return this.finish(held, {
      from: ['processing'],
      to: 'queued',
      leaseOwner: held.lease,
      now: this.deps.clock.now(),
      set: { status_detail: detail, lease_owner: null, lease_expires_at: null, attempts: Math.max(0, attempts - 1) },
    });
  }

  /** queued | processing → cancelled by its owner; undefined when it was not active (or not theirs). */
  async cancel(owner: string, uuid: string): Promise<JobRow | undefined> {
    const row = await this.terminal(uuid, {
      from: ACTIVE_STATUSES,
      to: 'cancelled',
      owner,
      now: this.deps.clock.now(),
      set: { status_detail: 'cancelled by the client' },
    });
    return row;
  }

  /**
   * Recovers running jobs whose lease ran out (the worker died or hung): back to the queue, at
   * their old place, while attempts are left; failed once JOB_MAX_ATTEMPTS claims have lapsed.
   * An index range over expired leases only, so it costs nothing while every worker is alive.
   */
  async recoverExpired(): Promise<number> {
    const { clock, config, log } = this.deps;
    const now = clock.now();
    let recovered = 0;
    for (const r of await expiredLeases(this.db, now, 100)) {
      if (Number(r.attempts) < config.jobMaxAttempts) {
        const row = await this.transitionNow(r.uuid, {
          from: ['processing'],
          to: 'queued',
          leaseExpiredBefore: now,
          now,
          set: {
            status_detail: 'waiting for a worker (the previous worker stopped responding)',
            lease_owner: null,
            lease_expires_at: null,
          },
        });
        if (row) {
          recovered++;
          log.warn({ job_uuid: r.uuid, attempts: Number(r.attempts) }, 'job lease expired; back in the queue');
        }
      } else {
        const row = await this.terminal(r.uuid, {
          from: ['processing'],
          to: 'failed',
          leaseExpiredBefore: now,
          now,
          set: {
            status_detail: 'failed',
            error_type: 'internal_error',
            error_message: `the worker running this job stopped responding ${config.jobMaxAttempts} times`,
          },
        });
        if (row) {
          recovered++;
          log.warn({ job_uuid: r.uuid }, 'job failed: attempts exhausted');
        }
      }
    }
    return recovered;
  }

  /**
   * Keeps the database's planner statistics in step with the queue: when the number of queued
   * jobs has grown past twice what it was at the last refresh (and past 1,000), analyze the jobs
   * table now rather than when autovacuum gets to it. Costs one read of the counters otherwise.
   */
  async tunePlanner(): Promise<void> {
    const { queued } = await countActive(this.db);
    if (queued < 1000 || queued < 2 * this.analyzedAt) return;
    if (await refreshPlannerStats(this.db, this.deps.store.dialect))
      this.deps.log.info({ queued }, 'refreshed planner statistics of the jobs table');
    this.analyzedAt = queued;
  }

  /** Waits for finishes still being recorded (shutdown). */
  async drain(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  private get notifiesInTransaction(): boolean {
    return this.deps.signals.transport?.publishWithin !== undefined;
  }

  private atomically<T>(needed: boolean, fn: (db: Kysely<Database>) => Promise<T>): Promise<T> {
    return needed ? this.db.transaction().execute(fn) : fn(this.db);
  }

  /** A non-terminal change, with the job-queued wake-up when it puts a job back in the queue. */
  private async transitionNow(uuid: string, spec: TransitionSpec): Promise<JobRow | undefined> {
    assertTransitions(spec.from, spec.to);
    const signals: Signal[] = spec.to === 'queued' ? [['job-queued', '']] : [];
    const row = await this.atomically(signals.length > 0 && this.notifiesInTransaction, async (trx) => {
      const r = await updateState(trx, uuid, spec, false);
      if (r) await this.deps.signals.publishWithin(trx, signals);
      return r;
    });
    if (row) this.deps.signals.deliverLocally(signals);
    return row;
  }

  /** A terminal change, alone in its transaction (cancel, exhaust). */
  private async terminal(uuid: string, spec: TransitionSpec): Promise<JobRow | undefined> {
    const applied = await this.db.transaction().execute((trx) => this.applyFinishes(trx, [{ uuid, spec }]));
    this.afterCommit(applied);
    return applied.rows[0]?.row;
  }

  /**
   * Worker finishes are recorded in batches: while one batch's transaction runs, the next
   * accumulates, so an idle queue adds no latency and a busy one shares one transaction (and one
   * NOTIFY) among many finishes. A finish that meets a database outage is retried until it can be
   * written (or FINISH_RETRY_MS passes: then the lease decides, and the job is run again).
   */
  private finish(meta: Held, spec: PendingFinish['spec']): Promise<JobRow | undefined> {
    assertTransitions(spec.from, spec.to);
    return new Promise((resolve, reject) => {
      this.pending.push({ uuid: meta.uuid, spec, meta, since: Date.now(), resolve, reject });
      this.kick();
    });
  }

  private kick(): void {
    if (this.flushing || this.pending.length === 0) return;
    this.flushing = this.flush().finally(() => {
      this.flushing = undefined;
      this.kick();
    });
  }

  private async flush(): Promise<void> {
    const batch = this.pending.splice(0, 200);
    let backoff = 100;
    for (;;) {
      try {
        const applied = await this.db.transaction().execute((trx) => this.applyFinishes(trx, batch));
        this.afterCommit(applied);
        batch.forEach((p, i) => p.resolve(applied.rows[i]?.row));
        return;
      } catch (err) {
        if (isDatabaseUnavailable(err)) {
          for (const p of batch.filter((x) => Date.now() - x.since > FINISH_RETRY_MS)) {
            batch.splice(batch.indexOf(p), 1);
            p.reject(err);
          }
          if (batch.length === 0) return;
          if (backoff === 100)
            this.deps.log.warn(
              { err, jobs: batch.length },
              'database unavailable: job finishes will be recorded when it is back',
            );
          await new Promise((r) => setTimeout(r, backoff));
          backoff = Math.min(backoff * 2, 5_000);
          continue;
        }
        if (batch.length === 1) {
          batch[0]!.reject(err);
          return;
        }
        // One bad finish must not fail the others: record them one by one.
        for (const p of batch) {
          try {
            const applied = await this.db.transaction().execute((trx) => this.applyFinishes(trx, [p]));
            this.afterCommit(applied);
            p.resolve(applied.rows[0]?.row);
          } catch (e) {
            p.reject(e);
          }
        }
        return;
      }
    }
  }

  /** Applies state changes inside `trx`: the updates, their outbox rows and one NOTIFY. */
  private async applyFinishes(
    trx: Kysely<Database>,
    items: ReadonlyArray<{ uuid: string; spec: TransitionSpec; meta?: Held }>,
  ): Promise<Applied> {
    const rows: Applied['rows'] = [];
    const events = [];
    const signals: Signal[] = [];
    for (const { uuid, spec, meta } of items) {
      assertTransitions(spec.from, spec.to);
      const terminal = isTerminal(spec.to);
      const row = await updateState(trx, uuid, spec, terminal);
      rows.push(row ? { row, meta } : undefined);
      if (!row) continue;
      if (terminal) {
        const event = terminalEvent(row, spec.now, this.deps.config.webhookRetryScheduleMs[0]);
        if (event) events.push(event);
        if (spec.to === 'cancelled') signals.push(['job-cancelled', uuid]);
        signals.push(['job-finished', uuid]);
      } else if (spec.to === 'queued') {
        signals.push(['job-queued', '']);
      }
    }
    await insertWebhookEvents(trx, events);
    if (events.length > 0) signals.push(['webhooks-due', '']);
    const unique = dedupe(signals);
    await this.deps.signals.publishWithin(trx, unique);
    return { rows, signals: unique };
  }

  /** What follows every committed change, wherever it happened: local signals, then metrics. */
  private afterCommit(applied: Applied): void {
    const { signals, metrics, clock } = this.deps;
    signals.deliverLocally(applied.signals);
    for (const done of applied.rows) {
      if (!done || !isTerminal(done.row.status)) continue;
      const { row, meta } = done;
      metrics?.jobsFinished.inc({ job_type: row.job_type, status: row.status });
      if (meta?.startedAt !== undefined) {
        metrics?.processingSeconds.observe(
          { job_type: row.job_type, status: row.status },
          (clock.now() - meta.startedAt) / 1000,
        );
      }
    }
  }
}

interface Applied {
  rows: Array<{ row: JobRow; meta?: Held } | undefined>;
  signals: Signal[];
}

function dedupe(list: Signal[]): Signal[] {
  const seen = new Set<string>();
  return list.filter(([n, a]) => {
    const k = `${n} ${a}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}
