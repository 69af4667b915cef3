/**
 * One delivery attempt: POST the stored body, byte for byte, through the guarded agent (the
 * public-address rule on the address actually connected to), no redirects followed, the whole
 * exchange (DNS, connect, request, response headers and body) bounded by WEBHOOK_TIMEOUT: a
 * receiver that trickles its answer byte by byte (never idle, so no idle timeout fires) is cut at
 * the bound, and the attempt counts as timed out whatever status it began with.
 */
import { describeNetworkError, formatDuration, networkErrorCode } from '../media/net-errors.js';
import type { Dispatcher } from 'undici';
import type { Clock } from '../clock.js';
import { createGuardedAgent, type IsPublic, type LookupAll } from '../media/index.js';
import { deliveryHeaders } from './sign.js';

export interface SenderOptions {
  allowPrivate: boolean;
  timeoutMs: number;
  clock: Clock;
  lookup?: LookupAll;
  isPublic?: IsPublic;
}

/** What is sent: straight from the webhook_events row. */
export interface Deliverable {
  event_id: string;
  url: string;
  secret: string | null;
  body: string;
  /** An owner endpoint's secrets before a rotation, still honoured: one more webhook-signature each. */
  previousSecrets?: readonly string[];
}

export interface AttemptResult {
  ok: boolean;
  startedAt: number;
  durationMs: number;
  httpStatus: number | null;
  /** Why a non-2xx or failed attempt failed, in words for the client; null on success. */
  error: string | null;
}

/** The response body is read (and thrown away) up to this much, so the connection can be reused. */
const MAX_RESPONSE_BYTES = 64 * 1024;

/** Short client-facing text for a failed connection (no stack traces). */
export function describeDeliveryError(err: unknown): string {
  if (networkErrorCode(err) === 'ERR_BLOCKED_ADDRESS') return 'refused: the host is not a public address';
  return describeNetworkError(err, 'receiver');
}

/** Origin and path of a webhook URL, parsed once per URL rather than once per attempt. */
interface Target {
  origin: string;
  path: string;
}
const TARGET_CACHE_SIZE = 1_000;

/** Marks an attempt that ended by itself (an Error made once: making one per attempt costs a stack trace). */
const SETTLED = new Error('webhook attempt settled');

/** One attempt under way: its result, and abort (shutdown), which rejects the result with its reason. */
export interface Attempt {
  readonly result: Promise<AttemptResult>;
  abort(reason: Error): void;
}

/**
 * The attempt as undici's dispatch handler: the status and a bounded count of the answer's bytes,
 * no response stream, no abort signal and no headers object of our own (the cheapest way through
 * undici, as this runs for every delivery). Settles once: answered (the status, whatever happens to
 * the connection after the headers, as a drained body would), failed before an answer, timed out
 * (the whole exchange, a trickling answer included), or aborted (rejected with the reason).
 */
class AttemptHandler implements Attempt, Dispatcher.DispatchHandler {
  readonly result: Promise<AttemptResult>;
  private resolve!: (r: AttemptResult) => void;
  private reject!: (err: unknown) => void;
  private controller: Dispatcher.DispatchController | undefined;
  /** Set once settled: what undici still reports (the abort's own error) is ignored. */
  private stopReason: Error | undefined;
  private status = 0;
  private durationMs = 0;
  private bytes = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly startedAt: number,
    private readonly t0: number,
    private readonly timeoutMs: number,
  ) {
    this.result = new Promise<AttemptResult>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    this.timer = setTimeout(() => {
      this.fail(`timed out after ${formatDuration(timeoutMs)}`, new Error('webhook attempt timed out'));
    }, timeoutMs);
  }

  abort(reason: Error): void {
    if (this.stop(reason)) this.reject(reason);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    // Aborted or timed out while queued for a connection: never sent.
    if (this.stopReason) controller.abort(this.stopReason);
    else this.controller = controller;
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number): void {
    if (statusCode < 200) return; // 1xx: the answer is still to come
    this.status = statusCode;
    this.durationMs = performance.now() - this.t0;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.bytes += chunk.length;
    // Read no further than the bound: the answer counts, the connection is dropped.
    if (this.bytes > MAX_RESPONSE_BYTES) this.answered(controller);
  }

  onResponseEnd(): void {
    this.answered(undefined);
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, err: Error): void {
    if (this.status !== 0) this.answered(undefined);
    else this.fail(describeDeliveryError(err));
  }

  /** Settles with `error` (no status); aborts the exchange with `reason` if it is still going. */
  fail(error: string, reason?: Error): void {
    if (!this.stop(reason ?? new Error(error))) return;
    this.resolve({
      ok: false,
      startedAt: this.startedAt,
      durationMs: performance.now() - this.t0,
      httpStatus: null,
      error,
    });
  }

  private answered(controller: Dispatcher.DispatchController | undefined): void {
    if (!this.stop(controller ? new Error('webhook answer too large') : undefined)) return;
    const status = this.status;
    const ok = status >= 200 && status < 300;
    let error: string | null = null;
    if (status >= 300 && status < 400) error = `HTTP ${status}: redirects are not followed`;
    else if (!ok) error = `HTTP ${status}`;
    this.resolve({ ok, startedAt: this.startedAt, durationMs: this.durationMs, httpStatus: status, error });
  }

  /** Marks the attempt settled (false if it was already) and aborts the exchange with `reason`, if given. */
  private stop(reason: Error | undefined): boolean {
    if (this.stopReason) return false;
    this.stopReason = reason ?? SETTLED;
    clearTimeout(this.timer);
    if (reason && this.controller && !this.controller.aborted) this.controller.abort(reason);
    return true;
  }
}

export class WebhookSender {
  private readonly agent: Dispatcher;
  private readonly targets = new Map<string, Target>();

  constructor(private readonly opts: SenderOptions) {
    this.agent = createGuardedAgent({
      allowPrivate: opts.allowPrivate,
      lookup: opts.lookup,
      isPublic: opts.isPublic,
      connectTimeoutMs: opts.timeoutMs,
    });
  }

  /** One attempt, to its end (see start). */
  send(event: Deliverable): Promise<AttemptResult> {
    return this.start(event).result;
  }

  /**
   * Starts one attempt with a fresh timestamp (and signature). Its result never rejects for the
   * receiver's sake; `abort` (shutdown) rejects it with the abort's reason, so the caller can hand
   * the event back. One timer per attempt bounds the whole exchange.
   */
  start(event: Deliverable): Attempt {
    const { clock, timeoutMs } = this.opts;
    const startedAt = clock.now();
    const handler = new AttemptHandler(startedAt, performance.now(), timeoutMs);
    try {
      const target = this.target(event.url);
      const body = Buffer.from(event.body, 'utf8');
      const headers = deliveryHeaders({
        eventId: event.event_id,
        timestamp: Math.floor(startedAt / 1000),
        body,
        secret: event.secret,
        previousSecrets: event.previousSecrets,
      });
      // No undici timers of its own: the attempt's one timer bounds the whole exchange.
      this.agent.dispatch({ ...target, method: 'POST', headers, body, headersTimeout: 0, bodyTimeout: 0 }, handler);
    } catch (err) {
      // A URL that does not parse, or undici refusing the request: a failed attempt, never a throw.
      handler.fail(describeDeliveryError(err));
    }
    return handler;
  }

  /** Throws (like undici would) on a URL that does not parse. */
  private target(url: string): Target {
    let t = this.targets.get(url);
    if (!t) {
      const u = new URL(url);
      t = { origin: u.origin, path: `${u.pathname}${u.search}` };
      if (this.targets.size >= TARGET_CACHE_SIZE) this.targets.clear();
      this.targets.set(url, t);
    }
    return t;
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
