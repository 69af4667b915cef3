import os from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Signals } from '../signals.js';
import type { Store } from '../store/db.js';
import { claimDueEvent, finishScheduledAttempt, nextDueAt, releaseEvent, type WebhookEventRow } from '../store/webhooks.js';
import { destinationOf } from './events.js';
import type { WebhookSender } from './send.js';

export interface DispatcherOptions {
  store: Store;
  clock: Clock;
  signals: Signals;
  log: Logger;
  sender: WebhookSender;
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
}

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

export const DEFAULT_POLL_MS = 1_000;
export const LEASE_MARGIN_MS = 30_000;

/**
 * Delivers the webhook outbox. Claims due events one at a time under a lease (so a dispatcher
 * that dies mid-attempt loses the event only until its lease runs out, and dispatchers in other
 * processes never take the same attempt), keeps at most `concurrency` attempts in flight and at
 * most `perDestination` per URL origin (one slow or dead receiver cannot take every slot), and
 * sleeps until the next due time (at most `pollMs`) or until a job finishes in this process.
 */
export class WebhookDispatcher {
  readonly id = `${os.hostname()}:${process.pid}:wh-${randomBytes(3).toString('hex')}`;
  readonly perDestination: number;
  readonly pollMs: number;
  readonly leaseMs: number;
  private readonly inFlight = new Map<string, InFlight>();
  private stopping = false;
  private loopDone: Promise<void> = Promise.resolve();
  private wake: (() => void) | undefined;
  private woken = false;
  private readonly onFinished = () => this.poke();

  constructor(private readonly opts: DispatcherOptions) {
    if (opts.scheduleMs.length === 0) throw new Error('webhook schedule must have at least one attempt');
    this.perDestination = Math.max(1, opts.perDestination ?? Math.min(4, Math.ceil(opts.concurrency / 4)));
    this.pollMs = opts.pollMs ?? DEFAULT_POLL_MS;
    this.leaseMs = opts.leaseMs ?? opts.timeoutMs + LEASE_MARGIN_MS;
  }

  start(): void {
    this.opts.signals.on('job-finished', this.onFinished);
    this.loopDone = this.loop();
  }

  /**
   * Stops claiming; in-flight attempts get `graceMs` to finish, then are aborted and their
   * events handed back (due again at once, no attempt recorded).
   */
  async stop(graceMs = 5_000): Promise<void> {
    this.stopping = true;
    this.opts.signals.off('job-finished', this.onFinished);
    this.poke();
    await this.loopDone;
    const all = Promise.all([...this.inFlight.values()].map((f) => f.done));
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((r) => {
      timer = setTimeout(r, graceMs);
    });
    await Promise.race([all, grace]);
    clearTimeout(timer);
    for (const f of this.inFlight.values()) f.controller.abort(new Shutdown());
    await all;
  }

  /** Attempts in flight in this process. */
  get active(): number {
    return this.inFlight.size;
  }

  private poke(): void {
    this.woken = true;
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  private sleep(ms: number): Promise<void> {
    if (this.woken || this.stopping) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(done, Math.max(0, ms));
      const self = this;
      function done() {
        clearTimeout(t);
        if (self.wake === done) self.wake = undefined;
        resolve();
      }
      this.wake = done;
    });
  }

  private busyDestinations(): string[] {
    const counts = new Map<string, number>();
    for (const f of this.inFlight.values()) counts.set(f.destination, (counts.get(f.destination) ?? 0) + 1);
    return [...counts].filter(([, n]) => n >= this.perDestination).map(([d]) => d);
  }

  private async loop(): Promise<void> {
    const { store, clock, log } = this.opts;
    while (!this.stopping) {
      this.woken = false;
      let sleepMs = this.pollMs;
      try {
        // Fill the free slots, one claim at a time so the per-destination cap holds.
        while (!this.stopping && this.inFlight.size < this.opts.concurrency) {
          const event = await claimDueEvent(store.db, store.dialect, {
            leaseOwner: this.id,
            leaseMs: this.leaseMs,
            now: clock.now(),
            skipDestinations: this.busyDestinations(),
          });
          if (!event) break;
          this.launch(event);
        }
        if (this.inFlight.size < this.opts.concurrency) {
          const now = clock.now();
          const next = await nextDueAt(store.db, now);
          if (next !== undefined) sleepMs = Math.min(sleepMs, next - now);
        }
        // With every slot taken, a finishing attempt wakes the loop (poke); the poll is a backstop.
      } catch (err) {
        log.error({ err }, 'webhook dispatcher: claiming deliveries failed');
      }
      await this.sleep(sleepMs);
    }
  }

  private launch(event: WebhookEventRow): void {
    const controller = new AbortController();
    const destination = event.destination ?? destinationOf(event.url);
    const done = this.attempt(event, controller.signal)
      .catch((err) => this.opts.log.error({ err, event_id: event.event_id, job_uuid: event.job_uuid }, 'webhook delivery bookkeeping failed'))
      .finally(() => {
        this.inFlight.delete(event.event_id);
        this.poke();
      });
    this.inFlight.set(event.event_id, { destination, controller, done });
  }

  private async attempt(event: WebhookEventRow, signal: AbortSignal): Promise<void> {
    const { store, clock, sender, scheduleMs } = this.opts;
    const elog = this.opts.log.child({ event_id: event.event_id, job_uuid: event.job_uuid, event_type: event.event_type });
    const number = Number(event.attempts) + 1;
    let result;
    try {
      result = await sender.send(event, signal);
    } catch (err) {
      if (err instanceof Shutdown) {
        await releaseEvent(store.db, event.event_id, this.id, clock.now());
        elog.info({ attempt: number }, 'webhook attempt abandoned at shutdown; it will be retried');
        return;
      }
      throw err;
    }
    const now = clock.now();
    let state: 'pending' | 'delivered' | 'failed';
    let nextAttemptAt: number | null = null;
    if (result.ok) state = 'delivered';
    else if (number >= scheduleMs.length) state = 'failed';
    else {
      state = 'pending';
      nextAttemptAt = now + scheduleMs[number]!;
    }
    const applied = await finishScheduledAttempt(store.db, event.event_id, {
      leaseOwner: this.id,
      claimedAttempts: Number(event.attempts),
      attempt: { ...result, manual: false },
      state,
      nextAttemptAt,
      now,
    });
    const fields = { attempt: number, http_status: result.httpStatus, error: result.error, duration_ms: Math.round(result.durationMs) };
    if (!applied) elog.warn(fields, 'webhook attempt recorded, but the event had moved on (lease lost or delivered by hand)');
    else if (state === 'delivered') elog.info(fields, 'webhook delivered');
    else if (state === 'failed') elog.warn(fields, `webhook delivery failed after ${number} attempts`);
    else elog.info({ ...fields, next_attempt_at: new Date(nextAttemptAt!).toISOString() }, 'webhook attempt failed; retry scheduled');
  }
}
