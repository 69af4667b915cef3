import os from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Metrics } from '../metrics.js';
import type { SignalName, Signals } from '../signals.js';
import type { Store } from '../store/db.js';
import { DATABASE, isDatabaseUnavailable } from '../store/errors.js';
import { OutageBackoff } from '../runtime/outage.js';
import { Wakeable } from '../runtime/wake.js';
import {
  claimDueEvents,
  MAX_RECORD_BATCH,
  nextDueAt,
  pendingDestinations,
  recordScheduledAttempts,
  type DestinationClaim,
  type ScheduledAttempt,
  type WebhookEventRow,
} from '../store/webhooks.js';
import {
  endpointsByIds,
  recordEndpointHealth,
  type DisabledEndpoint,
  type EndpointOutcome,
} from '../store/webhook-endpoints.js';
import { destinationOf } from './events.js';
import type { AttemptResult, Deliverable, WebhookSender } from './send.js';

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
type Claimed = WebhookEventRow & Pick<Deliverable, 'previousSecrets'>;

/** Thrown into an in-flight attempt when the dispatcher stops; the event is handed back. */
class Shutdown extends Error {
  constructor() {
    super('webhook dispatcher stopping');
    this.name = 'AbortError';
  }
}

interface InFlight {
  destination: string;
  controller: AbortController;
  done: Promise<void>;
}

/** Events of one destination held by this dispatcher: claimed and waiting for a slot, or in flight. */
interface Destination {
  queue: Claimed[];
  inFlight: number;
  /** Its last attempt got an answer within FAST_MS: worth claiming ahead for. */
  fast: boolean;
}

/** A finished attempt waiting to be recorded. */
interface Finished extends ScheduledAttempt {
  jobUuid: string;
  eventType: string;
  number: number;
  endpoint?: EndpointOutcome;
}

export const DEFAULT_POLL_MS = 1_000;
export const LEASE_MARGIN_MS = 30_000;
export const DEFAULT_DISABLE_AFTER_MS = 5 * 86_400_000;
/** A destination that answers fast gets up to perDestination × this claimed ahead of its slots. */
const CLAIM_AHEAD_ROUNDS = 16;
const FAST_MS = 1_000;
/** A claimed event is sent only while its lease has the timeout plus this left; else handed back. */
const LEASE_RESERVE_MS = 5_000;
/** Destinations looked at per claim (round robin beyond that). */
const DESTINATIONS_PER_CLAIM = 64;
/** While busy, how often to look for destinations not yet held (a wake-up signal looks at once). */
const LOOK_AROUND_MS = 250;
/** While attempts are in flight, a finished one waits up to this long for others to share its write. */
const RECORD_GATHER_MS = 20;
/** ... or until this many have finished. */
const RECORD_GATHER_COUNT = 64;
/** At shutdown, how long unrecorded attempts may wait for an unavailable database. */
const FINAL_FLUSH_MS = 2_000;

function outcomeLabel(r: AttemptResult): string {
  if (r.ok) return 'success';
  if (r.httpStatus !== null) return 'http_error';
  if (r.error?.startsWith('timed out')) return 'timeout';
  if (r.error?.startsWith('refused:')) return 'blocked';
  return 'network_error';
}

/**
 * Delivers the webhook outbox.
 *
 * Claims due events in batches (one statement for many destinations) under a lease, so a
 * dispatcher that dies mid-attempt loses its events only until their leases run out, and
 * dispatchers in other processes never take the same attempt. Keeps at most `concurrency`
 * attempts in flight and at most `perDestination` per URL origin (one slow or dead receiver
 * cannot take every slot); a destination that answers fast gets a few rounds claimed ahead, so a
 * finishing attempt starts the next one at once, without a database round trip. Finished attempts
 * are recorded in batches: one transaction for all that finished while the previous batch was
 * being written. Sleeps until the next due time (at most `pollMs`), a WAKE_SIGNAL, or room for
 * more. A database outage is ridden out: claims back off (exponential, capped at 5 s), attempts
 * already finished stay in memory until they can be recorded, one warning per outage.
 */
export class WebhookDispatcher {
  readonly id = `${os.hostname()}:${process.pid}:wh-${randomBytes(3).toString('hex')}`;
  readonly perDestination: number;
  readonly pollMs: number;
  readonly leaseMs: number;
  readonly disableAfterMs: number;
  private readonly inFlight = new Map<string, InFlight>();
  private readonly held = new Map<string, Destination>();
  /** Destinations the last claim left with due events (they get another claim when room frees up). */
  private readonly knownDue = new Set<string>();
  private cursor = '';
  private lastLookAround = 0;
  private lookAround = true;
  private stopping = false;
  private loopDone: Promise<void> = Promise.resolve();
  /** Woken by WAKE_SIGNAL, room freed for a destination with due events, the database's return, or stop. */
  private readonly wake = new Wakeable();
  /** Ends the outage backoff's pause (which wake-ups do not cut short). */
  private readonly stopped = new AbortController();
  private readonly backoff: OutageBackoff;

  private finished: Finished[] = [];
  /** The batch being written right now. */
  private writing = 0;
  private toRelease: string[] = [];
  private flushing: Promise<void> | undefined;
  /** Cancels the scheduled (not yet running) flush. */
  private cancelFlush: (() => void) | undefined;
  private draining = false;

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
  }

  start(): void {
    this.opts.signals.on(WAKE_SIGNAL, this.onWake);
    this.loopDone = this.loop();
  }

  /**
   * Stops claiming and hands back what was claimed but not started; in-flight attempts get
   * `graceMs` to finish, then are aborted and their events handed back (due again at once, no
   * attempt recorded). Finished attempts are recorded before it returns (if the database lets).
   */
  async stop(graceMs = 5_000): Promise<void> {
    this.stopping = true;
    this.opts.signals.off(WAKE_SIGNAL, this.onWake);
    this.stopped.abort();
    this.wake.wake();
    await this.loopDone;
    for (const d of this.held.values()) this.toRelease.push(...d.queue.splice(0).map((e) => e.event_id));
    const all = Promise.all([...this.inFlight.values()].map((f) => f.done));
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((r) => {
      timer = setTimeout(r, graceMs);
    });
    await Promise.race([all, grace]);
    clearTimeout(timer);
    for (const f of this.inFlight.values()) f.controller.abort(new Shutdown());
    await all;
    await this.finalFlush();
  }

  /** Attempts in flight in this process. */
  get active(): number {
    return this.inFlight.size;
  }

  /** Finished attempts not yet recorded (held while the database is unavailable). */
  get unrecorded(): number {
    return this.finished.length + this.writing;
  }

  private poke(): void {
    this.wake.wake();
  }

  private destination(name: string): Destination {
    let d = this.held.get(name);
    if (!d) {
      if (this.held.size >= 1_024)
        for (const [k, v] of this.held) if (v.queue.length === 0 && v.inFlight === 0) this.held.delete(k);
      d = { queue: [], inFlight: 0, fast: false };
      this.held.set(name, d);
    }
    return d;
  }

  private limitFor(d: Destination | undefined): number {
    return this.perDestination * (d?.fast ? CLAIM_AHEAD_ROUNDS : 1);
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

  private async loop(): Promise<void> {
    while (!this.stopping) {
      this.wake.clear(); // the claim pass below looks anyway
      let sleepMs = this.pollMs;
      try {
        sleepMs = await this.claimPass();
        this.databaseBack();
      } catch (err) {
        if (isDatabaseUnavailable(err)) {
          await new Wakeable().wait(this.databaseDown(err), this.stopped.signal);
          continue;
        }
        this.opts.log.error({ err }, 'webhook dispatcher: claiming deliveries failed');
      }
      await this.wake.wait(sleepMs, this.stopped.signal);
    }
  }

  /** One look at the table: claims what this dispatcher has room for. Returns how long to sleep. */
  private async claimPass(): Promise<number> {
    const { store, clock } = this.opts;
    const now = clock.now();
    const maxHeld = this.opts.concurrency * CLAIM_AHEAD_ROUNDS;
    // Finished attempts are waiting for the database: do not take more before they are written.
    if (this.finished.length >= maxHeld) return this.pollMs;
    let candidates: string[];
    if (this.lookAround || now - this.lastLookAround >= LOOK_AROUND_MS) {
      this.lookAround = false;
      this.lastLookAround = now;
      const found = await pendingDestinations(store.db, this.cursor, DESTINATIONS_PER_CLAIM);
      this.cursor = found.length === DESTINATIONS_PER_CLAIM ? found[found.length - 1]!.destination : '';
      candidates = found.filter((d) => d.dueAt <= now).map((d) => d.destination);
      for (const c of candidates) this.knownDue.add(c);
    } else {
      candidates = [...this.knownDue];
    }
    let free = maxHeld - this.totalHeld();
    const claims: DestinationClaim[] = [];
    for (const name of candidates) {
      if (free <= 0) break;
      if (!this.worthClaiming(name)) continue;
      const limit = Math.min(this.roomFor(name), free);
      claims.push({ destination: name, limit });
      free -= limit;
    }
    if (claims.length > 0) {
      const rows = await this.withEndpointSecrets(
        await claimDueEvents(store.db, store.dialect, {
          leaseOwner: this.id,
          leaseMs: this.leaseMs,
          now,
          destinations: claims,
        }),
        now,
      );
      const got = new Map<string, number>();
      for (const row of rows) {
        const name = row.destination ?? destinationOf(row.url);
        got.set(name, (got.get(name) ?? 0) + 1);
        this.destination(name).queue.push(row);
      }
      // Fewer than asked: nothing more is due there for now.
      for (const c of claims) if ((got.get(c.destination) ?? 0) < c.limit) this.knownDue.delete(c.destination);
      this.startReady();
    }
    if (this.knownDue.size > 0) return this.pollMs; // room frees up as attempts finish, and they poke
    const next = await nextDueAt(store.db, now);
    return next === undefined ? this.pollMs : Math.min(this.pollMs, next - now);
  }

  /**
   * Signs owner endpoints' deliveries with the endpoint's secrets of the moment (one primary-key
   * read for the claim): a rotation applies to retries too. A delivery whose endpoint is gone or
   * disabled meanwhile is handed back unsent (its row was skipped with the endpoint).
   */
  private async withEndpointSecrets(rows: WebhookEventRow[], now: number): Promise<Claimed[]> {
    const ids = [...new Set(rows.flatMap((r) => (r.endpoint_id ? [r.endpoint_id] : [])))];
    if (ids.length === 0) return rows;
    const endpoints = new Map((await endpointsByIds(this.opts.store.db, ids)).map((e) => [e.id, e]));
    const out: Claimed[] = [];
    for (const row of rows) {
      const ep = row.endpoint_id ? endpoints.get(row.endpoint_id) : undefined;
      if (!row.endpoint_id) out.push(row);
      else if (!ep || ep.status !== 'enabled') this.toRelease.push(row.event_id);
      else {
        const previous = ep.previous_secret && Number(ep.previous_secret_expires_at) > now ? [ep.previous_secret] : [];
        out.push({ ...row, secret: ep.secret, previousSecrets: previous });
      }
    }
    if (out.length < rows.length) this.scheduleFlush();
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
        if (Number(event.lease_expires_at) - clock.now() < timeoutMs + LEASE_RESERVE_MS) {
          // Waited too long behind slow attempts: hand it back rather than risk a second sender.
          this.toRelease.push(event.event_id);
          this.scheduleFlush();
          continue;
        }
        this.launch(name, d, event);
        started = true;
      }
      if (started) {
        // To the back of the line: the next free slot goes to another destination first.
        this.held.delete(name);
        this.held.set(name, d);
      }
    }
  }

  private launch(name: string, d: Destination, event: Claimed): void {
    const controller = new AbortController();
    d.inFlight++;
    const done = this.attempt(event, d, controller)
      .catch((err: unknown) =>
        this.opts.log.error(
          { err, event_id: event.event_id, job_uuid: event.job_uuid },
          'webhook delivery bookkeeping failed',
        ),
      )
      .finally(() => {
        this.inFlight.delete(event.event_id);
        d.inFlight--;
        this.startReady();
        if (this.knownDue.size > 0 && (!this.knownDue.has(name) || this.worthClaiming(name))) this.poke();
      });
    this.inFlight.set(event.event_id, { destination: name, controller, done });
  }

  private async attempt(event: Claimed, d: Destination, controller: AbortController): Promise<void> {
    const { clock, sender, scheduleMs, metrics } = this.opts;
    const claimedAttempts = event.attempts;
    const number = claimedAttempts + 1;
    let result: AttemptResult;
    try {
      result = await sender.send(event, controller);
    } catch (err) {
      if (err instanceof Shutdown) {
        this.toRelease.push(event.event_id);
        this.opts.log.info(
          { event_id: event.event_id, job_uuid: event.job_uuid, attempt: number },
          'webhook attempt abandoned at shutdown; it will be retried',
        );
        return;
      }
      throw err;
    }
    d.fast = result.httpStatus !== null && result.durationMs < FAST_MS;
    metrics?.webhookAttempts.inc({ outcome: outcomeLabel(result) });
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
    this.finished.push({
      eventId: event.event_id,
      jobUuid: event.job_uuid,
      eventType: event.event_type,
      number,
      claimedAttempts,
      attempt: { ...result, manual: false },
      state,
      nextAttemptAt,
      now,
      endpoint: event.endpoint_id
        ? { endpointId: event.endpoint_id, ok: result.ok, gone, startedAt: result.startedAt }
        : undefined,
    });
    this.scheduleFlush();
  }

  /**
   * Records what finished, soon: right after the running write if there is one (natural
   * batching); when idle, at once (setImmediate gathers what finished in the same turn); while
   * other attempts are in flight, once RECORD_GATHER_COUNT have finished or after
   * RECORD_GATHER_MS, so a busy dispatcher writes a few large batches rather than many small
   * ones (the delivery itself is never delayed: its event stays leased until then); while the
   * database is unavailable, after the backoff.
   */
  private scheduleFlush(): void {
    if (this.flushing || this.draining) return;
    if (this.cancelFlush) {
      if (this.finished.length < RECORD_GATHER_COUNT || this.backoff.down) return;
      this.cancelFlush(); // enough gathered: write now
      this.cancelFlush = undefined;
    }
    const run = () => {
      this.cancelFlush = undefined;
      this.flushing = this.flush().finally(() => {
        this.flushing = undefined;
        if (this.finished.length > 0 || this.toRelease.length > 0) this.scheduleFlush();
      });
    };
    const wait = this.backoff.down
      ? this.backoff.currentMs
      : this.inFlight.size > 0 && this.finished.length < RECORD_GATHER_COUNT
        ? RECORD_GATHER_MS
        : 0;
    if (wait > 0) {
      const t = setTimeout(run, wait);
      this.cancelFlush = () => clearTimeout(t);
    } else {
      const i = setImmediate(run);
      this.cancelFlush = () => clearImmediate(i);
    }
  }

  /** Writes finished attempts and hand-backs until none are left or the database is unavailable. */
  private async flush(): Promise<void> {
    const { store, clock, log } = this.opts;
    while (this.finished.length > 0 || this.toRelease.length > 0) {
      const batch = this.finished.splice(0, MAX_RECORD_BATCH);
      const release = this.toRelease.splice(0, MAX_RECORD_BATCH);
      let applied: Set<string>;
      let disabled: DisabledEndpoint[] = [];
      const outcomes = batch.flatMap((f) => (f.endpoint ? [f.endpoint] : []));
      this.writing = batch.length;
      try {
        const now = clock.now();
        applied = await recordScheduledAttempts(store.db, this.id, batch, release, now, async (trx) => {
          if (outcomes.length > 0) disabled = await recordEndpointHealth(trx, outcomes, this.disableAfterMs, now);
        });
        this.writing = 0;
        this.databaseBack();
      } catch (err) {
        this.writing = 0;
        if (isDatabaseUnavailable(err)) {
          // Kept, in order, for the next try: the attempts happened and must be on record.
          this.finished.unshift(...batch);
          this.toRelease.unshift(...release);
          this.databaseDown(err);
          return;
        }
        log.error(
          { err, event_ids: batch.map((b) => b.eventId) },
          'recording webhook attempts failed; those events will be sent again when their leases run out',
        );
        continue;
      }
      for (const e of disabled) this.endpointDisabled(e);
      for (const f of batch) {
        const fields = {
          event_id: f.eventId,
          job_uuid: f.jobUuid,
          event_type: f.eventType,
          attempt: f.number,
          http_status: f.attempt.httpStatus,
          error: f.attempt.error,
          duration_ms: Math.round(f.attempt.durationMs),
        };
        if (!applied.has(f.eventId))
          log.warn(fields, 'webhook attempt recorded, but the event had moved on (lease lost or delivered by hand)');
        else if (f.state === 'delivered') log.info(fields, 'webhook delivered');
        else if (f.state === 'failed') log.warn(fields, `webhook delivery failed after ${f.number} attempts`);
        else
          log.info(
            { ...fields, next_attempt_at: new Date(f.nextAttemptAt!).toISOString() },
            'webhook attempt failed; retry scheduled',
          );
      }
    }
  }

  /** The operator event: one warning line and the metric (the dashboard lists disabled endpoints). */
  private endpointDisabled(e: DisabledEndpoint): void {
    this.opts.metrics?.webhookEndpointsDisabled.inc({ reason: e.kind });
    this.opts.log.warn(
      { endpoint_id: e.id, owner: e.owner, url: e.url, reason: e.reason },
      `webhook endpoint disabled: ${e.reason}`,
    );
  }

  /** At shutdown: waits for the running write, then writes the rest, retrying an outage briefly. */
  private async finalFlush(): Promise<void> {
    this.draining = true;
    this.cancelFlush?.();
    this.cancelFlush = undefined;
    const deadline = this.opts.clock.now() + FINAL_FLUSH_MS;
    for (;;) {
      await this.flushing;
      if (this.finished.length === 0 && this.toRelease.length === 0) return;
      this.flushing = this.flush();
      await this.flushing;
      this.flushing = undefined;
      if (this.finished.length === 0 && this.toRelease.length === 0) return;
      if (this.opts.clock.now() >= deadline) break;
      await new Promise((r) => setTimeout(r, this.backoff.currentMs || this.pollMs));
    }
    this.opts.log.warn(
      { unrecorded: this.finished.length, unreleased: this.toRelease.length },
      'webhook dispatcher stopped with attempts not recorded (database unavailable); their events will be sent again when their leases run out',
    );
  }

  /** Notes an outage (one warning per outage, by the Backoff) and returns how long to back off. */
  private databaseDown(err: unknown): number {
    return this.backoff.failed(err);
  }

  /** The database answered: ends an outage (one line), records what waited, and looks again at once. */
  private databaseBack(): void {
    if (!this.backoff.down) return;
    this.backoff.succeeded();
    this.lookAround = true;
    if (!this.flushing) {
      this.cancelFlush?.();
      this.cancelFlush = undefined;
      this.scheduleFlush();
    }
    this.poke();
  }
}
