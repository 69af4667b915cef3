/**
 * One delivery attempt as undici's dispatch handler: the status and a bounded count of the
 * answer's bytes, nothing else. It runs for every delivery, so it takes the cheapest way through
 * undici: the core's own handler interface (the one undici's request() uses), with no wrapper
 * around it, no headers object parsed from the raw ones, no response stream, no abort signal, no
 * promise and no timer of its own (WebhookSender's one timer bounds every attempt in flight).
 */
import type { Dispatcher } from 'undici';
import { describeNetworkError, formatDuration, networkErrorCode } from '../media/net-errors.js';

export interface AttemptResult {
  ok: boolean;
  startedAt: number;
  durationMs: number;
  httpStatus: number | null;
  /** Why a non-2xx or failed attempt failed, in words for the client; null on success. */
  error: string | null;
}

/** Short client-facing text for a failed connection (no stack traces). */
export function describeDeliveryError(err: unknown): string {
  if (networkErrorCode(err) === 'ERR_BLOCKED_ADDRESS') return 'refused: the host is not a public address';
  return describeNetworkError(err, 'receiver');
}

/**
 * How an attempt ends: with its result, or, when aborted (shutdown), without one and with the
 * abort's reason. Called once, never inside WebhookSender.start.
 */
export type AttemptDone = (result: AttemptResult | undefined, aborted?: Error) => void;

/** One attempt under way; abort (shutdown) ends it without a result. */
export interface Attempt {
  abort(reason: Error): void;
}

/** The response body is read (and thrown away) up to this much, so the connection can be reused. */
const MAX_RESPONSE_BYTES = 64 * 1024;

/** Marks an attempt that ended by itself (an Error made once: making one per attempt costs a stack trace). */
const SETTLED = new Error('webhook attempt settled');

/**
 * Settles once: answered (the status, whatever happens to the connection after the headers, as a
 * drained body would), failed before an answer, timed out (the whole exchange, a trickling answer
 * included), or aborted. Implements the handler interface undici marks deprecated in its types,
 * which undici's own request() is still built on: the newer one is reached through a wrapper
 * (UnwrapHandler) that parses every answer's headers and trailers into objects first.
 */
export class AttemptHandler implements Attempt, Dispatcher.DispatchHandler {
  /** performance.now() by which the attempt times out. */
  readonly deadline: number;
  /** True while WebhookSender.start runs: an attempt that ends then reports on the next microtask. */
  starting = true;
  private abortExchange: ((err: Error) => void) | undefined;
  /** Set once settled: what undici still reports (the abort's own error) is ignored. */
  private stopReason: Error | undefined;
  private status = 0;
  private durationMs = 0;
  private bytes = 0;

  constructor(
    private readonly startedAt: number,
    private readonly t0: number,
    private readonly timeoutMs: number,
    private readonly done: AttemptDone,
  ) {
    this.deadline = t0 + timeoutMs;
  }

  abort(reason: Error): void {
    if (this.stop(reason)) this.report(undefined, reason);
  }

  timedOut(): void {
    this.fail(`timed out after ${formatDuration(this.timeoutMs)}`, new Error('webhook attempt timed out'));
  }

  onConnect(abort: (err?: Error) => void): void {
    // Aborted or timed out while queued for a connection: never sent.
    if (this.stopReason) abort(this.stopReason);
    else this.abortExchange = abort;
  }

  onHeaders(statusCode: number): boolean {
    if (statusCode < 200) return true; // 1xx: the answer is still to come
    this.status = statusCode;
    this.durationMs = performance.now() - this.t0;
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.bytes += chunk.length;
    // Read no further than the bound: the answer counts, the connection is dropped.
    if (this.bytes > MAX_RESPONSE_BYTES) this.answered(new Error('webhook answer too large'));
    return true;
  }

  onComplete(): void {
    this.answered(undefined);
  }

  onError(err: Error): void {
    if (this.status !== 0) this.answered(undefined);
    else this.fail(describeDeliveryError(err));
  }

  /** Settles with `error` (no status); aborts the exchange with `reason` if it is still going. */
  fail(error: string, reason?: Error): void {
    if (!this.stop(reason ?? new Error(error))) return;
    const durationMs = performance.now() - this.t0;
    this.report({ ok: false, startedAt: this.startedAt, durationMs, httpStatus: null, error });
  }

  private answered(dropConnection: Error | undefined): void {
    if (!this.stop(dropConnection)) return;
    const status = this.status;
    const ok = status >= 200 && status < 300;
    let error: string | null = null;
    if (status >= 300 && status < 400) error = `HTTP ${status}: redirects are not followed`;
    else if (!ok) error = `HTTP ${status}`;
    this.report({ ok, startedAt: this.startedAt, durationMs: this.durationMs, httpStatus: status, error });
  }

  private report(result: AttemptResult | undefined, aborted?: Error): void {
    if (this.starting) queueMicrotask(() => this.done(result, aborted));
    else this.done(result, aborted);
  }

  /** Marks the attempt settled (false if it was already) and aborts the exchange with `reason`, if given. */
  private stop(reason: Error | undefined): boolean {
    if (this.stopReason) return false;
    this.stopReason = reason ?? SETTLED;
    if (reason && this.abortExchange) this.abortExchange(reason);
    return true;
  }
}
