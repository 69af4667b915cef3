import os from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Metrics } from '../metrics.js';
import type { SignalName, Signals } from '../signals.js';
import type { Store } from '../store/store.js';
import { DATABASE } from '../store/errors.js';
import { BatchWriter } from '../runtime/batch-writer.js';
import { Loop } from '../runtime/loop.js';
import { OutageBackoff } from '../runtime/outage.js';
import { Wakeable } from '../runtime/wake.js';
import {
  claimDueEvents,
  dueDestinations,
  MAX_RECORD_BATCH,
  nextDueAt,
  openDispatchConnection,
  pendingDestinations,
  recordScheduledAttempts,
  type ClaimedEventRow,
  type DestinationClaim,
  type ScheduledAttempt,
} from '../store/webhooks.js';
import {
  endpointsByIds,
  recordEndpointHealth,
  type DisabledEndpoint,
  type EndpointOutcome,
} from '../store/webhook-endpoints.js';
import { ClaimCursors } from './claim-cursors.js';
import { destinationOfRow } from './events.js';
import type { Attempt, AttemptResult } from './attempt.js';
import type { Deliverable, WebhookSender } from './send.js';

/** The signal that means "new deliveries may be due" (the poll is the backstop). */
export const WAKE_SIGNAL: SignalName = 'webhooks-due';

export interface DispatcherOptions {
  store: Store;
  clock: Clock;
  signals: Signals;
  log: Logger;
  sender: WebhookSender;
  metrics?: Metrics;
  /** Delay before each attempt (WEBHOOK_RETRY_SCHEDULE); its length is the number of attempts. */
  scheduleMs: readonly number[];
  /** WEBHOOK_TIMEOUT: bounds one attempt. */
  timeoutMs: number;
  /** WEBHOOK_CONCURRENCY: attempts in flight in this process. */
  concurrency: number;
  /** Attempts in flight per destination (URL origin); default min(4, ceil(concurrency / 4)). */
  perDestination?: number;
  /** Longest sleep between looks at the table; default 1 s. */
  pollMs?: number;
  /** Lease on a claimed event; default timeout + 30 s. */
  leaseMs?: number;
  /** WEBHOOK_DISABLE_AFTER: an owner endpoint failing this long is disabled; default 5 days. */
  disableAfterMs?: number;
}

/** A claimed event, with its owner endpoint's secrets when it has one. */
type Claimed = ClaimedEventRow & Pick<Deliverable, 'previousSecrets'>;

/** Thrown into an in-flight attempt when the dispatcher stops; the event is handed back. */
class Shutdown extends Error {
  constructor() {
    super('webhook dispatcher stopping');
    this.name = 'AbortError';
  }
}

/** Events of one destination held by this dispatcher: claimed and waiting for a slot, or in flight. */
interface Destination {
  queue: Claimed[];
  inFlight: number;
  /** Its recent answer time (moving average, ms); undefined until it answers, and after a failure to. */
  paceMs: number | undefined;
}

/** What the recorder writes: a finished attempt, or a claimed event handed back unsent. */
type Recording = Finished | { release: string; at: number };
/** Per item: whether its event moved on; the first item carries the endpoints its batch disabled. */
interface Recorded {
  applied: boolean;
  disabled?: DisabledEndpoint[];
}

/** A finished attempt waiting to be recorded; `at` is when it finished (its patience counts from there). */
interface Finished extends ScheduledAttempt {
  at: number;
  jobUuid: string;
  eventType: string;
  number: number;
  endpoint?: EndpointOutcome;
}

export const DEFAULT_POLL_MS = 1_000;
export const LEASE_MARGIN_MS = 30_000;
export const DEFAULT_DISABLE_AFTER_MS = 5 * 86_400_000;
/**
 * A destination that answers gets claimed ahead what its slots get through in CLAIM_AHEAD_MS at its
 * recent pace, at most MAX_AHEAD_ROUNDS × perDestination: enough that a finishing attempt starts the
 * next at once, however slow the claim's database round trip, and few enough to send within the lease.
 * A fast receiver (~0.25 ms an answer, 4 in flight) gets through 512 rounds in ~130 ms, so the claim
 * made at half of them has ~65 ms to come back: 128 rounds left it 16 ms, and claims on a loaded
 * machine took 15–200 ms, during which the send window ran empty (bench/dispatch-profile.ts).
 */
const CLAIM_AHEAD_MS = 2_000;
const MAX_AHEAD_ROUNDS = 512;
/**
 * All destinations together: at most concurrency × this held (queued or in flight). At the default
 * concurrency (4 slots a destination) that is two destinations' full claim-ahead: one fast receiver
 * never holds all of it, and another destination's events still get claimed.
 */
const HELD_ROUNDS = 64;
/** Finished attempts waiting for their recording past which no more are claimed: concurrency × this, at least two batches. */
const RECORDING_ROUNDS = 16;
/** A claimed event is sent only while its lease has the timeout plus this left; else handed back. */
const LEASE_RESERVE_MS = 5_000;
/**
 * Claimable events a look reads, most overdue first: when fewer are claimable, their destinations
 * are all that have any, and no page of destinations is read (destinations in back-off cost nothing).
 */
const DUE_ROWS_PER_LOOK = 256;
/** Destinations a look pages through while a backlog fills DUE_ROWS_PER_LOOK (round robin beyond that). */
const DESTINATIONS_PER_CLAIM = 64;
/** While busy, how often to look for destinations not yet held (a wake-up signal looks at once). */
const LOOK_AROUND_MS = 250;
/** While attempts are in flight, a finished one waits up to this long for others to share its write. */
const RECORD_LINGER_MS = 20;
/** At shutdown, how long unrecorded attempts may wait for an unavailable database. */
const FINAL_FLUSH_MS = 2_000;

/** The attempts metric's outcomes; an attempt's is counted by its index here. */
const OUTCOMES = ['success', 'http_error', 'timeout', 'blocked', 'network_error'] as const;

function outcomeOf(r: AttemptResult): number {
  if (r.ok) return 0;
  if (r.httpStatus !== null) return 1;
  if (r.error?.startsWith('timed out')) return 2;
  if (r.error?.startsWith('refused:')) return 3;
  return 4;
}

/** What write() answers for most items (one object for all). */
const APPLIED: Recorded = { applied: true };
const NOT_APPLIED: Recorded = { applied: false };

/**
 * Delivers the webhook outbox.
 *
 * Claims due events in batches (one statement for many destinations) under a lease, so a
 * dispatcher that dies mid-attempt loses its events only until their leases run out, and
 * dispatchers in other processes never take the same attempt. Keeps at most `concurrency`
 * attempts in flight and at most `perDestination` per URL origin (one slow or dead receiver
 * cannot take every slot); a destination that answers gets rounds claimed ahead by its pace, so a
 * finishing attempt starts the next one at once, without a database round trip. Finished attempts
 * are recorded by the one BatchWriter: one transaction for all that finished while the previous
 * batch was being written, the slot free meanwhile. The claim Loop sleeps until the next due time
 * (at most `pollMs`), a WAKE_SIGNAL, or room for more. A database outage is ridden out: claims back
 * off (the outage backoff), attempts already finished stay in memory until they can be recorded,
 * one warning per outage.
 */
export class WebhookDispatcher {
  readonly id = `${os.hostname()}:${process.pid}:wh-${randomBytes(3).toString('hex')}`;
  readonly perDestination: number;
  readonly pollMs: number;
  readonly leaseMs: number;
  readonly disableAfterMs: number;
  private readonly inFlight = new Set<Attempt>();
  /** Set at stop while attempts are in flight: called when the last one ends. */
  private onIdle: (() => void) | undefined;
  /** Attempts finished since the metric was last added to, by outcome (added once per recording batch). */
  private readonly uncounted = OUTCOMES.map(() => 0);
  private readonly held = new Map<string, Destination>();
  /** Destinations the last claim left with due events (they get another claim when room frees up). */
  private readonly knownDue = new Set<string>();
  /** Where each destination's next claim starts. */
  private readonly claimCursors = new ClaimCursors();
  private cursor = '';
  /**
   * The last look's most overdue claimable events filled its range (a backlog ahead of the rest):
   * while the destinations it found still have due events, looks page through destinations only
   * (the range would read the same backlog again, and the leased rows ahead of it).
   */
  private backlogged = false;
  private lastLookAround = 0;
  private lookAround = true;
  private stopping = false;
  /** Claims; woken by WAKE_SIGNAL, room freed for a destination with due events, or stop. */
  private readonly loop: Loop;
  private readonly backoff: OutageBackoff;
  private readonly recorder: BatchWriter<Recording, Recorded>;
  /** Attempts and hand-backs submitted to the recorder and not yet written. */
  private recording = 0;
  /** A claim pass was skipped for the recorder's backlog: its catching up pokes the loop. */
  private heldBack = false;
  /**
   * The last recording met a database outage. The recorder says nothing itself: it reports to the
   * claim loop's OutageBackoff (one warning for both), whose passes, which may only read (nothing
   * claimable), do not end the outage meanwhile.
   */
  private recordingFails = false;
  /** Set at stop: what is not recorded by then (the database still down) is given up. */
  private drainBy: number | undefined;
  /** Closes the dispatcher's own SQLite connection (store/webhooks.ts openDispatchConnection). */
  private closeConnection: (() => Promise<void>) | undefined;

  private readonly onWake = () => {
    this.lookAround = true;
    this.poke();
  };

  constructor(private readonly opts: DispatcherOptions) {
    if (opts.scheduleMs.length === 0) throw new Error('webhook schedule must have at least one attempt');
    this.perDestination = Math.max(1, opts.perDestination ?? Math.min(4, Math.ceil(opts.concurrency / 4)));
    this.pollMs = opts.pollMs ?? DEFAULT_POLL_MS;
    this.leaseMs = opts.leaseMs ?? opts.timeoutMs + LEASE_MARGIN_MS;
    this.disableAfterMs = opts.disableAfterMs ?? DEFAULT_DISABLE_AFTER_MS;
    this.backoff = new OutageBackoff({
      log: opts.log,
      who: 'webhook dispatcher',
      dependency: DATABASE,
      otherMs: this.pollMs,
    });
    this.loop = new Loop({
      step: async () => {
        const sleepMs = await this.claimPass();
        if (!this.recordingFails) this.backoff.succeeded();
        return sleepMs;
      },
      failed: (err) => this.backoff.failed(err),
    });
    this.recorder = new BatchWriter<Recording, Recorded>({
      write: (items) => this.write(items),
      afterCommit: (items, out) => this.recorded(items, out),
      // Held through an outage while running (the attempts happened); at stop, until drainBy.
      patience: (item) => (this.drainBy === undefined ? Infinity : this.drainBy - item.at),
      now: () => opts.clock.now(),
      // No log of its own: write() reports an outage to the claim loop's OutageBackoff (one warning).
      what: 'webhook attempts',
      dependency: DATABASE,
      maxBatch: MAX_RECORD_BATCH[opts.store.dialect],
      // While attempts are in flight more will finish soon: one transaction for several of them.
      gather: { ms: () => (this.inFlight.size > 0 && !this.stopping ? RECORD_LINGER_MS : 0) },
    });
  }

  start(): void {
    this.closeConnection ??= openDispatchConnection(this.opts.store.db);
    this.opts.signals.on(WAKE_SIGNAL, this.onWake);
    this.loop.start();
  }

  /**
   * Stops claiming and hands back what was claimed but not started; in-flight attempts get
   * `graceMs` to finish, then are aborted and their events handed back (due again at once, no
   * attempt recorded). Finished attempts are recorded before it returns (if the database lets).
   */
  async stop(graceMs = 5_000): Promise<void> {
    this.stopping = true;
    this.opts.signals.off(WAKE_SIGNAL, this.onWake);
    await this.loop.stop();
    for (const d of this.held.values()) for (const e of d.queue.splice(0)) this.release(e);
    const all = this.inFlight.size === 0 ? Promise.resolve() : new Promise<void>((r) => (this.onIdle = r));
    const graceOver = new AbortController();
    await Promise.race([all, Wakeable.sleep(graceMs, graceOver.signal)]);
    graceOver.abort();
    for (const attempt of this.inFlight.values()) attempt.abort(new Shutdown());
    await all;
    this.drainBy = this.opts.clock.now() + FINAL_FLUSH_MS;
    await this.recorder.drain();
    const close = this.closeConnection;
    this.closeConnection = undefined;
    await close?.();
  }

  /** Attempts in flight in this process. */
  get active(): number {
    return this.inFlight.size;
  }

  /** Finished attempts not yet recorded (held while the database is unavailable). */
  get unrecorded(): number {
    return this.recording;
  }

  private poke(): void {
    this.loop.wake.wake();
  }

  private destination(name: string): Destination {
    let d = this.held.get(name);
    if (!d) {
      if (this.held.size >= 1_024)
        for (const [k, v] of this.held) if (v.queue.length === 0 && v.inFlight === 0) this.held.delete(k);
      d = { queue: [], inFlight: 0, paceMs: undefined };
      this.held.set(name, d);
    }
    return d;
  }

  private limitFor(d: Destination | undefined): number {
    if (d?.paceMs === undefined) return this.perDestination;
    const rounds = Math.floor(CLAIM_AHEAD_MS / Math.max(d.paceMs, 0.01));
    return this.perDestination * Math.max(1, Math.min(MAX_AHEAD_ROUNDS, rounds));
  }

  private roomFor(name: string): number {
    const d = this.held.get(name);
    return this.limitFor(d) - (d ? d.queue.length + d.inFlight : 0);
  }

  /** Claim for a destination only when a good share of its limit is free: claims come in batches. */
  private worthClaiming(name: string): boolean {
    return this.roomFor(name) >= Math.ceil(this.limitFor(this.held.get(name)) / 2);
  }

  private totalHeld(): number {
    let n = this.inFlight.size;
    for (const d of this.held.values()) n += d.queue.length;
    return n;
  }

  /** Finished attempts waiting for the database past which no more are claimed (RECORDING_ROUNDS, or an outage). */
  private get recordingLimit(): number {
    return Math.max(this.opts.concurrency * RECORDING_ROUNDS, 2 * MAX_RECORD_BATCH[this.opts.store.dialect]);
  }

  /** One look at the table: claims what this dispatcher has room for. Returns how long to sleep. */
  private async claimPass(): Promise<number> {
    const { store, clock } = this.opts;
    const now = clock.now();
    if (this.recording >= this.recordingLimit) {
      // Do not take more before they are written: the recorder pokes when it has caught up (with
      // nothing in flight, no finishing attempt would).
      this.heldBack = true;
      return this.pollMs;
    }
    const looked = this.lookAround || now - this.lastLookAround >= LOOK_AROUND_MS;
    if (looked) {
      // The destinations known to have due events are claimed beside the look, not after it: a look
      // steps over every due event still leased (held here, or waiting for its recording), thousands
      // behind a fast receiver, and took 30–110 ms on a loaded machine, longer than their queue lasted.
      // Both end before the pass does (a failure of either fails it): a claim never runs beside another.
      const [found, claimed] = await Promise.allSettled([this.look(now), this.claimFor([...this.knownDue])]);
      if (claimed.status === 'rejected') throw claimed.reason;
      if (found.status === 'rejected') throw found.reason;
      await this.claimFor(found.value);
    } else await this.claimFor([...this.knownDue]);
    if (this.knownDue.size > 0) return this.pollMs; // room frees up as attempts finish, and they poke
    // Nothing known to be due. nextDueAt sees only what falls due after `now`: events due already
    // that this pass did not look for (it went by knownDue, or the look stopped at a page of
    // destinations) would wait for the poll. Look again at once instead.
    this.lookAround = true;
    if (!looked || this.cursor !== '') return 0;
    const next = await nextDueAt(store.db, now);
    return next === undefined ? this.pollMs : Math.min(this.pollMs, next - now);
  }

  /** Claims for `candidates` the room each has (within what all may hold) and starts what it can. */
  private async claimFor(candidates: readonly string[]): Promise<void> {
    const { store, clock } = this.opts;
    const now = clock.now();
    let free = this.opts.concurrency * HELD_ROUNDS - this.totalHeld();
    const claims: DestinationClaim[] = [];
    for (const name of candidates) {
      if (free <= 0) break;
      if (!this.worthClaiming(name)) continue;
      const limit = Math.min(this.roomFor(name), free);
      claims.push({ destination: name, limit, after: this.claimCursors.after(name, now) });
      free -= limit;
    }
    if (claims.length === 0) return;
    const epoch = this.claimCursors.epoch;
    const claimed = await claimDueEvents(store.db, store.dialect, {
      leaseOwner: this.id,
      leaseMs: this.leaseMs,
      now,
      destinations: claims,
    });
    this.claimCursors.advance(claims, claimed, now, epoch);
    const rows = await this.withEndpointSecrets(claimed, now);
    const got = new Map<string, number>();
    for (const row of rows) {
      const name = destinationOfRow(row);
      got.set(name, (got.get(name) ?? 0) + 1);
      this.destination(name).queue.push(row);
    }
    // Fewer than asked: nothing more is due there for now.
    for (const c of claims) if ((got.get(c.destination) ?? 0) < c.limit) this.knownDue.delete(c.destination);
    this.startReady();
  }

  /**
   * The destinations with claimable events (they join knownDue): those of the most overdue ones
   * (dueDestinations), and, while a backlog hides the rest behind them, a page of destinations
   * with pending events after the cursor instead, so that every destination gets its turn.
   */
  private async look(now: number): Promise<string[]> {
    this.lookAround = false;
    this.lastLookAround = now;
    const { db } = this.opts.store;
    const found = new Set<string>();
    if (!this.backlogged || this.knownDue.size === 0) {
      const due = await dueDestinations(db, now, DUE_ROWS_PER_LOOK);
      for (const d of due.destinations) found.add(d);
      this.backlogged = !due.complete;
      if (due.complete) this.cursor = '';
    }
    if (this.backlogged) {
      const page = await pendingDestinations(db, this.cursor, DESTINATIONS_PER_CLAIM);
      this.cursor = page.length === DESTINATIONS_PER_CLAIM ? page[page.length - 1]!.destination : '';
      for (const d of page) if (d.dueAt <= now) found.add(d.destination);
    }
    for (const c of found) this.knownDue.add(c);
    return [...found];
  }

  /**
   * Signs owner endpoints' deliveries with the endpoint's secrets of the moment (one primary-key
   * read for the claim): a rotation applies to retries too. A delivery whose endpoint is gone or
   * disabled meanwhile is handed back unsent (its row was skipped with the endpoint).
   */
  private async withEndpointSecrets(rows: ClaimedEventRow[], now: number): Promise<Claimed[]> {
    const wanted = new Set<string>();
    for (const r of rows) if (r.endpoint_id) wanted.add(r.endpoint_id);
    if (wanted.size === 0) return rows;
    const ids = [...wanted];
    const endpoints = new Map((await endpointsByIds(this.opts.store.db, ids)).map((e) => [e.id, e]));
    const out: Claimed[] = [];
    for (const row of rows) {
      const ep = row.endpoint_id ? endpoints.get(row.endpoint_id) : undefined;
      if (!row.endpoint_id) out.push(row);
      else if (!ep || ep.status !== 'enabled') this.release(row);
      else {
        const previous = ep.previous_secret && Number(ep.previous_secret_expires_at) > now ? [ep.previous_secret] : [];
        out.push({ ...row, secret: ep.secret, previousSecrets: previous });
      }
    }
    return out;
  }

  /** Starts queued events while there are slots, destinations taken in turn. */
  private startReady(): void {
    const { concurrency, timeoutMs, clock } = this.opts;
    if (this.stopping) return;
    for (const [name, d] of this.held) {
      if (this.inFlight.size >= concurrency) return;
      let started = false;
      while (d.queue.length > 0 && d.inFlight < this.perDestination && this.inFlight.size < concurrency) {
        const event = d.queue.shift()!;
        if (event.lease_expires_at - clock.now() < timeoutMs + LEASE_RESERVE_MS) {
          // Waited too long behind slow attempts: hand it back rather than risk a second sender.
          this.release(event);
          continue;
        }
        this.launch(name, d, event);
        started = true;
      }
      if (started && this.held.size > 1) {
        // To the back of the line: the next free slot goes to another destination first.
        this.held.delete(name);
        this.held.set(name, d);
      }
    }
  }

  private launch(name: string, d: Destination, event: Claimed): void {
    d.inFlight++;
    const attempt: Attempt = this.opts.sender.start(event, (result, aborted) => {
      this.settled(name, d, event, attempt, result, aborted);
    });
    this.inFlight.add(attempt);
  }

  /** An attempt ended (a result, or rejected at shutdown): its bookkeeping, then its slot goes to the next queued event. */
  private settled(
    name: string,
    d: Destination,
    event: Claimed,
    attempt: Attempt,
    result: AttemptResult | undefined,
    err: unknown,
  ): void {
    try {
      if (result) this.finished(event, d, result);
      else this.abandoned(event, err);
    } catch (err) {
      this.opts.log.error(
        { err, event_id: event.event_id, job_uuid: event.job_uuid },
        'webhook delivery bookkeeping failed',
      );
    }
    this.inFlight.delete(attempt);
    d.inFlight--;
    if (this.inFlight.size === 0) this.onIdle?.();
    this.startReady();
    if (this.knownDue.size > 0 && (!this.knownDue.has(name) || this.worthClaiming(name))) this.poke();
  }

  /** Aborted at shutdown: handed back, no attempt recorded. */
  private abandoned(event: Claimed, err: unknown): void {
    if (!(err instanceof Shutdown)) throw err;
    this.release(event);
    this.opts.log.info(
      { event_id: event.event_id, job_uuid: event.job_uuid, attempt: event.attempts + 1 },
      'webhook attempt abandoned at shutdown; it will be retried',
    );
  }

  /** The attempt's outcome: delivered, failed for good, or the next attempt scheduled. */
  private finished(event: Claimed, d: Destination, result: AttemptResult): void {
    const { clock, scheduleMs } = this.opts;
    const claimedAttempts = event.attempts;
    const number = claimedAttempts + 1;
    d.paceMs = result.httpStatus === null ? undefined : 0.8 * (d.paceMs ?? result.durationMs) + 0.2 * result.durationMs;
    this.uncounted[outcomeOf(result)]!++;
    const now = clock.now();
    let state: Finished['state'];
    let nextAttemptAt: number | null = null;
    // A receiver's 410 Gone ends an owner endpoint's delivery (and disables the endpoint).
    const gone = event.endpoint_id !== null && result.httpStatus === 410;
    if (result.ok) state = 'delivered';
    else if (gone || number >= scheduleMs.length) state = 'failed';
    else {
      state = 'pending';
      nextAttemptAt = now + scheduleMs[number]!;
    }
    this.submit({
      at: now,
      eventId: event.event_id,
      jobUuid: event.job_uuid,
      eventType: event.event_type,
      number,
      claimedAttempts,
      attempt: result,
      state,
      nextAttemptAt,
      now,
      endpoint: event.endpoint_id
        ? { endpointId: event.endpoint_id, ok: result.ok, gone, startedAt: result.startedAt }
        : undefined,
    });
  }

  /**
   * Adds the attempts finished since the last call to the attempts metric: once per recording batch,
   * not per attempt (prom-client hashes and checks the labels at every increment).
   */
  private countAttempts(): void {
    const counter = this.opts.metrics?.webhookAttempts;
    for (let i = 0; i < OUTCOMES.length; i++) {
      const n = this.uncounted[i]!;
      if (n === 0) continue;
      this.uncounted[i] = 0;
      counter?.inc({ outcome: OUTCOMES[i]! }, n);
    }
  }

  /** Hands a claimed event back unsent: due again at once (behind its destination's claim cursor). */
  private release(event: ClaimedEventRow): void {
    this.claimCursors.rewind(destinationOfRow(event));
    this.submit({ release: event.event_id, at: this.opts.clock.now() });
  }

  /** Recording is in the background: the slot is already free for the next attempt. */
  private submit(item: Recording): void {
    this.recording++;
    this.recorder.post(item, this.recordedOne, this.recordFailed);
  }

  private readonly recordedOne = () => {
    this.recording--;
    if (this.heldBack && this.recording < this.recordingLimit) {
      this.heldBack = false;
      this.poke();
    }
  };

  private readonly recordFailed = (err: unknown, item: Recording) => {
    this.recording--;
    const what = 'attempt' in item ? item.eventId : item.release;
    this.opts.log.error(
      { err, event_id: what },
      'recording a webhook attempt failed; its event will be sent again when its lease runs out',
    );
  };

  /** One transaction: the attempts, the hand-backs and the endpoints' failure records. */
  private async write(items: readonly Recording[]): Promise<Recorded[]> {
    this.countAttempts();
    const attempts: Finished[] = [];
    const release: string[] = [];
    const outcomes: EndpointOutcome[] = [];
    for (const i of items) {
      if (!('attempt' in i)) release.push(i.release);
      else {
        attempts.push(i);
        if (i.endpoint) outcomes.push(i.endpoint);
      }
    }
    const now = this.opts.clock.now();
    let disabled: DisabledEndpoint[] = [];
    const { db, dialect } = this.opts.store;
    const endpointHealth =
      outcomes.length > 0
        ? async (trx: typeof db) => {
            disabled = await recordEndpointHealth(trx, outcomes, this.disableAfterMs, now);
          }
        : undefined;
    let applied: Set<string>;
    try {
      applied = await recordScheduledAttempts(db, dialect, this.id, attempts, release, now, endpointHealth);
    } catch (err) {
      if (DATABASE.isOutage(err)) {
        this.recordingFails = true;
        this.backoff.failed(err);
      }
      throw err;
    }
    this.recordingFails = false;
    return items.map((i, n) => {
      const ok = 'attempt' in i ? applied.has(i.eventId) : true;
      if (n === 0 && disabled.length > 0) return { applied: ok, disabled };
      return ok ? APPLIED : NOT_APPLIED;
    });
  }

  /** After the commit: the operator events, and one log line per attempt. */
  private recorded(items: readonly Recording[], out: readonly Recorded[]): void {
    if (this.backoff.down) {
      // The database answered: the outage is over for the claims too (one line), which look again now.
      this.backoff.succeeded();
      this.poke();
    }
    for (const e of out[0]?.disabled ?? []) this.endpointDisabled(e);
    const { log } = this.opts;
    // Built only for lines the log level lets through: a delivery's info line is the common case.
    const info = log.isLevelEnabled('info');
    items.forEach((item, n) => {
      if (!('attempt' in item)) return;
      const f = item;
      const applied = out[n]!.applied;
      if (applied && f.state !== 'failed' && !info) return;
      const fields = {
        event_id: f.eventId,
        job_uuid: f.jobUuid,
        event_type: f.eventType,
        attempt: f.number,
        http_status: f.attempt.httpStatus,
        error: f.attempt.error,
        duration_ms: Math.round(f.attempt.durationMs),
      };
      if (!applied)
        log.warn(fields, 'webhook attempt recorded, but the event had moved on (lease lost or delivered by hand)');
      else if (f.state === 'delivered') log.info(fields, 'webhook delivered');
      else if (f.state === 'failed') log.warn(fields, `webhook delivery failed after ${f.number} attempts`);
      else
        log.info(
          { ...fields, next_attempt_at: new Date(f.nextAttemptAt!).toISOString() },
          'webhook attempt failed; retry scheduled',
        );
    });
  }

  /** The operator event: one warning line and the metric (the dashboard lists disabled endpoints). */
  private endpointDisabled(e: DisabledEndpoint): void {
    this.opts.metrics?.webhookEndpointsDisabled.inc({ reason: e.kind });
    this.opts.log.warn(
      { endpoint_id: e.id, owner: e.owner, url: e.url, reason: e.reason },
      `webhook endpoint disabled: ${e.reason}`,
    );
  }
}
