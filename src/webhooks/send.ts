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

  /**
   * Sends one attempt with a fresh timestamp (and signature). Never throws for the receiver's
   * sake; aborting `controller` (shutdown) rethrows its reason so the caller can hand the event
   * back. The timeout aborts the same controller: one controller and one timer per attempt, no
   * listeners, because this runs for every delivery.
   */
  async send(event: Deliverable, controller = new AbortController()): Promise<AttemptResult> {
    const { clock, timeoutMs } = this.opts;
    const startedAt = clock.now();
    const t0 = performance.now();
    const elapsed = () => performance.now() - t0;
    const body = Buffer.from(event.body, 'utf8');
    const headers = deliveryHeaders({
      eventId: event.event_id,
      timestamp: Math.floor(startedAt / 1000),
      body,
      secret: event.secret,
      previousSecrets: event.previousSecrets,
    });

    const signal = controller.signal;
    let timedOut = false as boolean; // set by the timer callback
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new Error('webhook attempt timed out'));
    }, timeoutMs);
    const result = (r: Omit<AttemptResult, 'startedAt' | 'durationMs'>): AttemptResult => ({
      ...r,
      startedAt,
      durationMs: elapsed(),
    });
    try {
      signal.throwIfAborted();
      let res: Dispatcher.ResponseData;
      try {
        res = await this.agent.request({
          ...this.target(event.url),
          method: 'POST',
          headers,
          body,
          signal,
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
        });
      } catch (err) {
        if (timedOut)
          return result({ ok: false, httpStatus: null, error: `timed out after ${formatDuration(timeoutMs)}` });
        if (signal.aborted) throw signal.reason;
        return result({ ok: false, httpStatus: null, error: describeDeliveryError(err) });
      }
      const status = res.statusCode;
      const durationMs = elapsed();
      // Drain so the socket can be reused: bounded in bytes, and in time by the timer (which
      // aborts the signal). An answer whose body has not ended within the timeout never came
      // whole: a timed-out attempt, like one without headers.
      await res.body.dump({ limit: MAX_RESPONSE_BYTES, signal }).catch(() => undefined);
      if (timedOut)
        return result({ ok: false, httpStatus: null, error: `timed out after ${formatDuration(timeoutMs)}` });
      if (signal.aborted) throw signal.reason;
      const ok = status >= 200 && status < 300;
      let error: string | null = null;
      if (status >= 300 && status < 400) error = `HTTP ${status}: redirects are not followed`;
      else if (!ok) error = `HTTP ${status}`;
      return { ok, startedAt, durationMs, httpStatus: status, error };
    } finally {
      clearTimeout(timer);
    }
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
