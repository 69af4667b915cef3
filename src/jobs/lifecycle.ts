import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { BatchWriter } from '../background/batch-writer.js';
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import type { Metrics } from '../metrics.js';
import type { SignalName, Signals } from '../signals.js';
import type { Store } from '../store/db.js';
import {
  claimByUuid,
  claimJobs,
  deferJobs,
  expiredLeases,
  insertJob,
  lockLimitedClaims,
  queueHead,
  renewLease,
  runningByOwner,
  updateState,
  type ClaimSpec,
  type JobRow,
  type NewJob,
} from '../store/jobs.js';
import type { Database } from '../store/schema.js';
import { insertWebhookEvents, type NewWebhookEvent } from '../store/webhooks.js';
import { terminalEvent } from './outbox.js';
import {
  MOVES,
  columnsOf,
  guardOf,
  type Change,
  type Failure,
  type Held,
  type Outcomes,
  type Reserve,
  type ResultInfo,
} from './changes.js';
import { isTerminal } from './states.js';

export type { Failure, Held, ResultInfo };

export interface LifecycleDeps {
  store: Store;
  clock: Clock;
  config: Config;
  signals: Signals;
  log: Logger;
  metrics?: Metrics;
}

export interface ClaimRequest {
  /** Lease token for this claim (unique per claim: a re-claim never shares an older attempt's). */
  leaseOwner: string;
  jobTypes: readonly string[];
  limit: number;
}

type Signal = readonly [SignalName, string];

/** What applying one change did: its answer, the rows it moved, and the signals it raises. */
interface Applied {
  out: Outcomes[keyof Outcomes];
  moved: JobRow[];
  /** Sent to every process (NOTIFY in the transaction) and delivered here after commit. */
  signals: Signal[];
  /** Delivered in this process only (live streams here see a claim at once; others poll). */
  local: Signal[];
  events: NewWebhookEvent[];
}

/** How many queued jobs the limited claim looks at (OWNER_MAX_RUNNING): bounds its cost. */
const LIMITED_WINDOW = 200;
/** A worker's finish that meets a database outage is retried this long before the lease decides. */
const FINISH_PATIENCE_MS = 5 * 60_000;
const FINISHES: ReadonlySet<Change['move']> = new Set(['complete', 'fail', 'retry', 'handBack']);

/**
 * The one write path of job state. Every change (create, claim, renew, complete, fail, retry, hand
 * back, cancel, recover, exhaust) is described in changes.ts, checked against states.ts's table,
 * and submitted to one batch writer: the changes that arrive while a batch is written share the
 * next transaction, which holds their updates, their webhook outbox rows and one NOTIFY. After the
 * commit, one step delivers local signals and counts metrics. Workers (in-process or remote), the
 * API and housekeeping call the methods below; nothing else updates a job's state.
 */
export class JobLifecycle {
  private readonly db: Kysely<Database>;
  private readonly writer: BatchWriter<Change, Applied>;

  constructor(private readonly deps: LifecycleDeps) {
    this.db = deps.store.db;
    this.writer = new BatchWriter<Change, Applied>({
      write: (changes) => this.write(changes),
      afterCommit: (changes, applied) => {
        this.afterCommit(changes, applied);
      },
      patience: (c) => (FINISHES.has(c.move) ? FINISH_PATIENCE_MS : 0),
      now: () => deps.clock.now(),
      log: deps.log,
      what: 'job changes (finishes are kept and written later)',
    });
  }

  /** Inserts a queued job; `reserve` runs first in its transaction and may veto it (false). */
  create(job: NewJob, reserve?: Reserve): Promise<boolean> {
    return this.submit({ move: 'create', at: this.now(), job, reserve });
  }

  /** Claims up to `limit` queued jobs of the given types (fair order; OWNER_MAX_RUNNING when set). */
  claim(req: ClaimRequest): Promise<JobRow[]> {
    return this.submit({ move: 'claim', at: this.now(), ...req });
  }

  /** Renews the lease (and shows `detail`); false when the job is no longer this lease's. */
  async progress(held: Held, detail?: string): Promise<boolean> {
    return (await this.renew(held, detail)) !== undefined;
  }

  /** The same, answering the job's type while the lease holds (remote heartbeats check the type's timeout). */
  renew(held: Held, detail?: string): Promise<string | undefined> {
    return this.submit({ move: 'renew', at: this.now(), held, detail });
  }

  /** processing → completed, if this lease still holds the job; undefined otherwise. */
  complete(held: Held, result: ResultInfo): Promise<JobRow | undefined> {
    return this.submit({ move: 'complete', at: this.now(), held, result });
  }

  /** processing → failed, if this lease still holds the job. */
  fail(held: Held, failure: Failure): Promise<JobRow | undefined> {
    return this.submit({ move: 'fail', at: this.now(), held, failure });
  }

  /** processing → queued after a failed attempt that may succeed on another (a remote worker's retryable failure). */
  retry(held: Held, detail: string): Promise<JobRow | undefined> {
    return this.submit({ move: 'retry', at: this.now(), held, detail });
  }

  /** processing → queued (a worker stopping hands its job back; the attempt does not count). */
  handBack(
    held: Held,
    attempts: number,
    detail = 'waiting for a worker (handed back at shutdown)',
  ): Promise<JobRow | undefined> {
    return this.submit({ move: 'handBack', at: this.now(), held, attempts, detail });
  }

  /** queued | processing → cancelled by its owner; undefined when it was not active (or not theirs). */
  cancel(owner: string, uuid: string): Promise<JobRow | undefined> {
    return this.submit({ move: 'cancel', at: this.now(), owner, uuid });
  }

  /**
   * Recovers running jobs whose lease ran out (the worker died or hung): back to the queue, at
   * their old place, while attempts are left; failed once JOB_MAX_ATTEMPTS claims have lapsed.
   * An index range over expired leases only, so it costs nothing while every worker is alive.
   */
  async recoverExpired(): Promise<number> {
    const { config, log } = this.deps;
    const at = this.now();
    const expired = await expiredLeases(this.db, at, 100);
    const done = await Promise.all(
      expired.map(async (r) => {
        const again = r.attempts < config.jobMaxAttempts;
        const row = again
          ? await this.submit({ move: 'recover', at, uuid: r.uuid })
          : await this.submit({ move: 'exhaust', at, uuid: r.uuid, maxAttempts: config.jobMaxAttempts });
        if (row && again) log.warn({ job_uuid: r.uuid, attempts: r.attempts }, 'job lease expired; back in the queue');
        if (row && !again) log.warn({ job_uuid: r.uuid }, 'job failed: attempts exhausted');
        return row;
      }),
    );
    return done.filter(Boolean).length;
  }

  /** Waits for changes still being written (shutdown). */
  drain(): Promise<void> {
    return this.writer.drain();
  }

  private now(): number {
    return this.deps.clock.now();
  }

  private async submit<C extends Change>(change: C): Promise<Outcomes[C['move']]> {
    const applied = await this.writer.submit(change);
    return applied.out as Outcomes[C['move']];
  }

  /** Writes a batch: one statement when a lone change needs no more, else one transaction. */
  private async write(changes: readonly Change[]): Promise<Applied[]> {
    const lone = changes.length === 1 ? this.oneStatement(changes[0]!) : undefined;
    if (lone) return [await lone()];
    return this.db.transaction().execute(async (trx) => {
      const applied: Applied[] = [];
      for (const change of changes) applied.push(await this.apply(trx, change));
      const events = applied.flatMap((a) => a.events);
      await insertWebhookEvents(trx, events);
      const signals = dedupe([
        ...applied.flatMap((a) => a.signals),
        ...(events.length > 0 ? [['webhooks-due', ''] as const] : []),
      ]);
      await this.deps.signals.publishWithin(trx, signals);
      // The batch's own signals (webhooks-due included) are delivered once, with the first change.
      if (applied[0]) applied[0] = { ...applied[0], signals };
      for (let i = 1; i < applied.length; i++) applied[i] = { ...applied[i]!, signals: [] };
      return applied;
    });
  }

  /**
   * The statements that stand alone, outside a transaction: a create whose NOTIFY fits in its
   * INSERT (PostgreSQL) or that has none to send (SQLite), and an unlimited claim (one UPDATE; its
   * signals are local). These are the hot paths of submit and claim.
   */
  private oneStatement(change: Change): (() => Promise<Applied>) | undefined {
    const { signals, store, config } = this.deps;
    if (change.move === 'create' && change.reserve === undefined) {
      const raised: Signal[] = [['job-queued', '']];
      const inline = signals.transport?.notifyExpression?.(raised);
      if (signals.transport && !inline) return undefined;
      return async () => {
        await insertJob(this.db, change.job, inline);
        return { out: true, moved: [], signals: raised, local: [], events: [] };
      };
    }
    if (change.move === 'claim' && config.ownerMaxRunning === 0) {
      return async () => {
        const rows = await claimJobs(this.db, store.dialect, this.claimSpec(change));
        return claimed(rows);
      };
    }
    return undefined;
  }

  private claimSpec(change: Extract<Change, { move: 'claim' }>): ClaimSpec {
    return { ...change, move: MOVES.claim, leaseMs: this.deps.config.jobLeaseMs, now: change.at };
  }

  /** Applies one change inside the batch's transaction. */
  private async apply(trx: Kysely<Database>, change: Change): Promise<Applied> {
    const { store, config } = this.deps;
    switch (change.move) {
      case 'create': {
        if (change.reserve && !(await change.reserve(trx))) return nothing(false);
        await insertJob(trx, change.job);
        return { out: true, moved: [], signals: [['job-queued', '']], local: [], events: [] };
      }
      case 'claim': {
        const spec = this.claimSpec(change);
        const rows =
          config.ownerMaxRunning === 0 ? await claimJobs(trx, store.dialect, spec) : await this.claimLimited(trx, spec);
        return claimed(rows);
      }
      case 'renew': {
        const { held, detail } = change;
        const until = change.at + config.jobLeaseMs;
        const jobType = await renewLease(trx, MOVES.renew, held.uuid, held.lease, until, detail);
        // Live event streams hear of a new detail at once (a plain lease renewal says nothing new).
        const raised: Signal[] = jobType !== undefined && detail !== undefined ? [['job-progress', held.uuid]] : [];
        return { out: jobType, moved: [], signals: raised, local: [], events: [] };
      }
      default:
        return this.applyMove(trx, change);
    }
  }

  /** A change of one job's status: the conditional update, then its outbox row and signals. */
  private async applyMove(
    trx: Kysely<Database>,
    change: Exclude<Change, { move: 'create' | 'claim' | 'renew' }>,
  ): Promise<Applied> {
    const move = MOVES[change.move];
    const uuid = 'held' in change ? change.held.uuid : change.uuid;
    const spec = { ...move, ...guardOf(change), set: columnsOf(change), now: change.at };
    const row = await updateState(trx, uuid, spec, isTerminal(move.to));
    if (!row) return nothing(undefined);
    const signals: Signal[] = [];
    const events: NewWebhookEvent[] = [];
    if (isTerminal(move.to)) {
      const event = terminalEvent(row, change.at, this.deps.config.webhookRetryScheduleMs[0]);
      if (event) events.push(event);
      if (move.to === 'cancelled') signals.push(['job-cancelled', uuid]);
      signals.push(['job-finished', uuid]);
    }
    if (move.to === 'queued') signals.push(['job-queued', '']);
    return { out: row, moved: [row], signals, local: [], events };
  }

  /** OWNER_MAX_RUNNING's claim: one process at a time looks at the queue's head and skips owners at their limit. */
  private async claimLimited(trx: Kysely<Database>, spec: ClaimSpec): Promise<JobRow[]> {
    const { config, store } = this.deps;
    await lockLimitedClaims(trx, store.dialect);
    const head = await queueHead(trx, spec.jobTypes, LIMITED_WINDOW);
    const running = await runningByOwner(trx, [...new Set(head.map((h) => h.owner))]);
    const picked: string[] = [];
    const blocked: string[] = [];
    for (const h of head) {
      const n = running.get(h.owner) ?? 0;
      if (picked.length < spec.limit && n < config.ownerMaxRunning) {
        picked.push(h.uuid);
        running.set(h.owner, n + 1);
      } else if (n >= config.ownerMaxRunning) blocked.push(h.uuid);
    }
    // An owner at its limit yields its place: its jobs in the window move behind it, so the
    // next claim's window holds other owners' jobs instead of the same blocked ones.
    const last = head[head.length - 1];
    if (picked.length < spec.limit && blocked.length > 0 && last) {
      await deferJobs(trx, blocked, last.vtime + 1, spec.now);
    }
    return claimByUuid(trx, picked, spec);
  }

  /** What follows every committed batch: local signals, then metrics. */
  private afterCommit(changes: readonly Change[], applied: readonly Applied[]): void {
    const { signals, metrics, clock } = this.deps;
    applied.forEach((a, i) => {
      signals.deliverLocally(a.signals);
      for (const [name, arg] of a.local) signals.deliver(name, arg);
      const change = changes[i]!;
      if (change.move === 'create' && a.out === true) metrics?.jobsSubmitted.inc({ job_type: change.job.job_type });
      for (const row of a.moved) {
        if (!isTerminal(row.status)) continue;
        metrics?.jobsFinished.inc({ job_type: row.job_type, status: row.status });
        const startedAt = 'held' in change ? change.held.startedAt : undefined;
        if (startedAt !== undefined) {
          metrics?.processingSeconds.observe(
            { job_type: row.job_type, status: row.status },
            (clock.now() - startedAt) / 1000,
          );
        }
      }
    });
  }
}

function nothing(out: Applied['out']): Applied {
  return { out, moved: [], signals: [], local: [], events: [] };
}

/** Streams in this process see queued → processing at once (others by their poll). */
function claimed(rows: JobRow[]): Applied {
  return { out: rows, moved: [], signals: [], local: rows.map((r) => ['job-progress', r.uuid] as const), events: [] };
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
