import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { BatchWriter } from '../runtime/batch-writer.js';
import { DATABASE, isTransactionConflict } from '../store/errors.js';
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import type { Metrics } from '../metrics.js';
import type { SignalName, Signals } from '../signals.js';
import type { Store } from '../store/store.js';
import {
  claimByUuid,
  claimJobs,
  deferJobs,
  duePurges,
  eraseJobData,
  expiredDeadlines,
  expiredLeases,
  insertJob,
  insertJobs,
  markPurged,
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
import { reserveIdempotencyKeys } from '../store/idempotency.js';
import { endpointEvents, terminalEvent } from './outbox.js';
import { endpointsOfOwners } from '../store/webhook-endpoints.js';
import {
  MOVES,
  attemptsLeft,
  effectsOf,
  guardOf,
  isPatient,
  writesOf,
  type Change,
  type ChangeOf,
  type NewEntry,
  type Failure,
  type Held,
  type Outcomes,
  type Reserve,
  type ResultInfo,
} from './moves.js';
import { isTerminalStatus, type JobProgress } from '../contract/api.js';

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

/**
 * The one write path of job state. Every change (create, claim, renew, complete, fail, retry, hand
 * back, cancel, recover, exhaust, the deadlines' expiry, the purge of a finished job) is described in changes.ts, checked against states.ts's table,
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
      patience: (c) => (isPatient(c) ? FINISH_PATIENCE_MS : 0),
      now: () => deps.clock.now(),
      log: deps.log,
      what: 'job changes (finishes are kept and written later)',
      dependency: DATABASE,
      isConflict: isTransactionConflict,
      gather: 'turn',
    });
  }

  /** Inserts a queued job; `reserve` runs first in its transaction and may veto it (false). */
  async create(job: NewJob, reserve?: Reserve): Promise<boolean> {
    const [created] = await this.submit({ move: 'create', at: this.now(), jobs: [{ job, reserve }] });
    return created === true;
  }

  /**
   * Inserts many queued jobs (a batch) in one transaction: each entry's `reserve` runs first and
   * may veto that entry alone; the others are inserted in multi-row statements. One answer per entry.
   */
  createMany(entries: ReadonlyArray<NewEntry>): Promise<boolean[]> {
    if (entries.length === 0) return Promise.resolve([]);
    return this.submit({ move: 'create', at: this.now(), jobs: entries });
  }

  /** Claims up to `limit` queued jobs of the given types (fair order; OWNER_MAX_RUNNING when set). */
  claim(req: ClaimRequest): Promise<JobRow[]> {
    return this.submit({ move: 'claim', at: this.now(), ...req });
  }

  /** Renews the lease (and shows `detail` and `progress`); false when the job is no longer this lease's. */
  async progress(held: Held, detail?: string, progress?: JobProgress): Promise<boolean> {
    return (await this.renew(held, detail, progress)) !== undefined;
  }

  /** The same, answering the job's type while the lease holds (remote heartbeats check the type's timeout). */
  renew(held: Held, detail?: string, progress?: JobProgress): Promise<string | undefined> {
    return this.submit({ move: 'renew', at: this.now(), held, detail, progress });
  }

  /** processing → completed, if this lease still holds the job; undefined otherwise. */
  complete(held: Held, result: ResultInfo): Promise<JobRow | undefined> {
    return this.submit({ move: 'complete', at: this.now(), held, result });
  }

  /** processing → failed, if this lease still holds the job. */
  fail(held: Held, failure: Failure): Promise<JobRow | undefined> {
    return this.submit({ move: 'fail', at: this.now(), held, failure });
  }

  /**
   * processing → queued after failed attempt number `attempt` that may succeed on another (a remote
   * worker's retryable failure). Callers check `attemptsLeft` first.
   */
  retry(held: Held, attempt: number, message: string): Promise<JobRow | undefined> {
    return this.submit({ move: 'retry', at: this.now(), held, attempt, message });
  }

  /** processing → queued (a worker hands its job back, saying `why`; the attempt does not count). */
  handBack(held: Held, why?: string): Promise<JobRow | undefined> {
    return this.submit({ move: 'handBack', at: this.now(), held, why });
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
        const again = attemptsLeft(r, config.jobMaxAttempts);
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

  /**
   * Cancels active jobs whose deadline (cancel_after) passed: queued ones with "deadline passed
   * while queued", running ones with "deadline passed while processing" (their worker aborts on
   * the job-cancelled signal or its next renewal). An index range over passed deadlines only
   * (jobs_deadlines), so it costs nothing while no deadline is due, at any backlog.
   */
  async expireDeadlines(limit = 500): Promise<number> {
    const at = this.now();
    const due = await expiredDeadlines(this.db, at, limit);
    const done = await Promise.all(
      due.map((r) => this.submit({ move: r.status === 'queued' ? 'expireQueued' : 'expireRunning', at, uuid: r.uuid })),
    );
    return done.filter(Boolean).length;
  }

  /**
   * The first half of a purge (DELETE, retention): erases the job's input, webhook and delivery
   * bodies and stops handing out its result; the caller deletes the blob (the returned row's
   * result_key), then calls `purged`. Undefined when the job is not a finished job (of `owner`)
   * with data left.
   */
  purge(uuid: string, owner?: string): Promise<JobRow | undefined> {
    return this.submit({ move: 'purge', at: this.now(), uuid, owner });
  }

  /** The second half: the blobs are gone, the job is a tombstone (`data_removed`). */
  purged(uuid: string): Promise<boolean> {
    return this.submit({ move: 'purged', at: this.now(), uuid });
  }

  /** Finished jobs whose purge is due (retention) or must be retried (jobs_purges: an index range). */
  duePurges(limit = 100): Promise<Array<{ uuid: string }>> {
    return duePurges(this.db, this.now(), limit);
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
      const applied = await this.applyAll(trx, changes);
      const events = [...applied.flatMap((a) => a.events), ...(await this.endpointEvents(trx, applied))];
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

  /** The owner endpoints' outbox rows for the jobs this batch finished (one owner-index read). */
  private async endpointEvents(trx: Kysely<Database>, applied: readonly Applied[]): Promise<NewWebhookEvent[]> {
    const finished = applied.flatMap((a) => a.moved).filter((r) => isTerminalStatus(r.status));
    if (finished.length === 0) return [];
    const endpoints = await endpointsOfOwners(trx, [...new Set(finished.map((r) => r.owner))]);
    return endpointEvents(finished, endpoints, this.now(), this.deps.config.webhookRetryScheduleMs[0]);
  }

  /**
   * The statements that stand alone, outside a transaction: a create whose NOTIFY fits in its
   * INSERT (PostgreSQL) or that has none to send (SQLite), and an unlimited claim (one UPDATE; its
   * signals are local). These are the hot paths of submit and claim.
   */
  private oneStatement(change: Change): (() => Promise<Applied>) | undefined {
    const { signals, store, config } = this.deps;
    const lone = change.move === 'create' && change.jobs.length === 1 ? change.jobs[0]! : undefined;
    if (lone && lone.reserve === undefined && lone.key === undefined) {
      const raised: Signal[] = [['job-queued', '']];
      const inline = signals.transport?.notifyExpression?.(raised);
      if (signals.transport && !inline) return undefined;
      return async () => {
        await insertJob(this.db, lone.job, inline);
        return { out: [true], moved: [], signals: raised, local: [], events: [] };
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

  private claimSpec(change: ChangeOf<'claim'>): ClaimSpec {
    return { ...change, move: MOVES.claim, leaseMs: this.deps.config.jobLeaseMs, now: change.at };
  }

  /**
   * Applies a batch's changes in order, except that its creates go in together, first: one
   * multi-row INSERT for all their jobs (as a batch submit's), not one statement per submit.
   */
  private async applyAll(trx: Kysely<Database>, changes: readonly Change[]): Promise<Applied[]> {
    const creates = changes.flatMap((c) => (c.move === 'create' ? [c] : []));
    const merged =
      creates.length > 1
        ? await this.apply(trx, { move: 'create', at: creates[0]!.at, jobs: creates.flatMap((c) => c.jobs) })
        : undefined;
    const applied: Applied[] = [];
    let from = 0;
    for (const change of changes) {
      if (merged && change.move === 'create') {
        const first = from === 0;
        const out = (merged.out as boolean[]).slice(from, (from += change.jobs.length));
        applied.push({ ...merged, out, signals: first ? merged.signals : [] });
      } else applied.push(await this.apply(trx, change));
    }
    return applied;
  }

  /** Applies one change inside the batch's transaction. */
  private async apply(trx: Kysely<Database>, change: Change): Promise<Applied> {
    const { store, config } = this.deps;
    switch (change.move) {
      case 'create': {
        const keyed = change.jobs.flatMap((e) => (e.key ? [e.key] : []));
        const reserved = keyed.length > 0 ? await reserveIdempotencyKeys(trx, keyed) : new Set<string>();
        const out: boolean[] = [];
        const rows: NewJob[] = [];
        for (const { job, reserve, key } of change.jobs) {
          // A key reserved once serves one entry (concurrent submits with one key may share a batch).
          const ok = key ? reserved.delete(key.key) : reserve === undefined || (await reserve(trx));
          out.push(ok);
          if (ok) rows.push(job);
        }
        if (rows.length === 1) await insertJob(trx, rows[0]!);
        else await insertJobs(trx, rows);
        return { out, moved: [], signals: rows.length > 0 ? [['job-queued', '']] : [], local: [], events: [] };
      }
      case 'claim': {
        const spec = this.claimSpec(change);
        const rows =
          config.ownerMaxRunning === 0 ? await claimJobs(trx, store.dialect, spec) : await this.claimLimited(trx, spec);
        return claimed(rows);
      }
      case 'renew': {
        const { held, detail, progress } = change;
        const until = change.at + config.jobLeaseMs;
        const json = progress === undefined ? undefined : JSON.stringify(progress);
        const jobType = await renewLease(trx, MOVES.renew, held.uuid, held.lease, until, detail, json);
        // Live event streams hear of a new detail or progress at once (a plain lease renewal says nothing new).
        const news = detail !== undefined || progress !== undefined;
        const raised: Signal[] = jobType !== undefined && news ? [['job-progress', held.uuid]] : [];
        return { out: jobType, moved: [], signals: raised, local: [], events: [] };
      }
      case 'purge': {
        const row = await eraseJobData(trx, change.uuid, {
          from: MOVES.purge.from,
          owner: change.owner,
          now: change.at,
        });
        return nothing(row);
      }
      case 'purged':
        return nothing(await markPurged(trx, change.uuid, { from: MOVES.purged.from, now: change.at }));
      default:
        return this.applyMove(trx, change);
    }
  }

  /** A change of one job's status: the conditional update, then its effects (outbox row, signals). */
  private async applyMove(
    trx: Kysely<Database>,
    change: Exclude<Change, { move: 'create' | 'claim' | 'renew' | 'purge' | 'purged' }>,
  ): Promise<Applied> {
    const { from, to } = MOVES[change.move];
    const uuid = 'held' in change ? change.held.uuid : change.uuid;
    const terminal = isTerminalStatus(to);
    const spec = {
      from,
      to,
      ...guardOf(change),
      ...writesOf(change),
      retentionMs: terminal ? this.deps.config.resultRetentionMs : undefined,
      now: change.at,
    };
    const row = await updateState(trx, uuid, spec);
    if (!row) return nothing(undefined);
    const { outbox, signals } = effectsOf(to, uuid);
    const event = outbox ? terminalEvent(row, change.at, this.deps.config.webhookRetryScheduleMs[0]) : undefined;
    return { out: row, moved: [row], signals, local: [], events: event ? [event] : [] };
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
      if (change.move === 'create' && Array.isArray(a.out)) {
        change.jobs.forEach(({ job }, j) => {
          if ((a.out as boolean[])[j]) metrics?.jobsSubmitted.inc({ job_type: job.job_type });
        });
      }
      for (const row of a.moved) {
        if (!isTerminalStatus(row.status)) continue;
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
