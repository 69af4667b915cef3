/**
 * One delivery attempt: POST the stored body, byte for byte, through the guarded agent (the
 * public-address rule on the address actually connected to), no redirects followed, the whole
 * exchange (DNS, connect, request, response headers and body) bounded by WEBHOOK_TIMEOUT: a
 * receiver that trickles its answer byte by byte (never idle, so no idle timeout fires) is cut at
 * the bound, and the attempt counts as timed out whatever status it began with.
 */
import type { Dispatcher } from 'undici';
import type { Clock } from '../clock.js';
import { createGuardedAgent, type IsPublic, type LookupAll } from '../media/index.js';
import {
  AttemptHandler,
  describeDeliveryError,
  type Attempt,
  type AttemptDone,
  type AttemptResult,
} from './attempt.js';
import { SecretKeys, signedDeliveryHeaders } from './sign.js';

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

/** Origin and path of a webhook URL, parsed once per URL rather than once per attempt. */
interface Target {
  origin: string;
  path: string;
}
const TARGET_CACHE_SIZE = 1_000;
/** Secrets whose HMAC keys are kept made (per-job secrets, endpoints' current and previous ones). */
const KEY_CACHE_SIZE = 1_000;

export class WebhookSender {
  private readonly agent: Dispatcher;
  private readonly targets = new Map<string, Target>();
  private readonly keys = new Map<string, SecretKeys>();
  /**
   * Attempts in flight, oldest first. All have the same timeout, so the first has the nearest
   * deadline: one timer, armed for it, bounds them all (a timer per attempt cost more than the rest
   * of its bookkeeping).
   */
  private readonly live = new Set<AttemptHandler>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: SenderOptions) {
    this.agent = createGuardedAgent({
      allowPrivate: opts.allowPrivate,
      lookup: opts.lookup,
      isPublic: opts.isPublic,
      connectTimeoutMs: opts.timeoutMs,
    });
  }

  /** One attempt, to its end (see start); rejects only when aborted. */
  send(event: Deliverable): Promise<AttemptResult> {
    return new Promise((resolve, reject) => {
      this.start(event, (result, aborted) => {
        if (result) resolve(result);
        else reject(aborted ?? new Error('webhook attempt aborted'));
      });
    });
  }

  /**
   * Starts one attempt with a fresh timestamp (and signature); `done` gets its result, never an
   * error for the receiver's sake (a URL that does not parse is a failed attempt too). `abort`
   * (shutdown) ends it without a result, so the caller can hand the event back.
   */
  start(event: Deliverable, done: AttemptDone): Attempt {
    const { clock, timeoutMs } = this.opts;
    const startedAt = clock.now();
    const handler = new AttemptHandler(startedAt, performance.now(), timeoutMs, (result, aborted) => {
      this.untrack(handler);
      done(result, aborted);
    });
    this.track(handler);
    try {
      const target = this.target(event.url);
      const body = Buffer.from(event.body, 'utf8');
      const headers = signedDeliveryHeaders(
        event.event_id,
        Math.floor(startedAt / 1000),
        body,
        event.secret ? this.keysOf(event.secret) : undefined,
        event.previousSecrets?.map((s) => this.keysOf(s)),
      );
      // No undici timers of its own: the sender's one timer bounds the whole exchange. A literal of
      // one shape, not a spread: undici reads a dozen options off it, absent ones included.
      const request = {
        origin: target.origin,
        path: target.path,
        method: 'POST',
        headers,
        body,
        headersTimeout: 0,
        bodyTimeout: 0,
      };
      this.agent.dispatch(request, handler);
    } catch (err) {
      // A URL that does not parse, or undici refusing the request: a failed attempt, never a throw.
      handler.fail(describeDeliveryError(err));
    }
    handler.starting = false;
    return handler;
  }

  private track(h: AttemptHandler): void {
    this.live.add(h);
    if (!this.timer) this.arm(h.deadline);
  }

  private untrack(h: AttemptHandler): void {
    this.live.delete(h);
    // Nothing left to bound: no timer keeps the process up.
    if (this.live.size === 0 && this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  private arm(deadline: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(this.expire, Math.max(1, Math.ceil(deadline - performance.now())));
  }

  /** Times out every attempt past its deadline, then waits for the next one's. */
  private readonly expire = (): void => {
    this.timer = undefined;
    const now = performance.now();
    for (const h of this.live) {
      if (h.deadline > now) {
        this.arm(h.deadline);
        return;
      }
      h.timedOut(); // settles it: out of `live`
    }
  };

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

  /** A secret's HMAC keys, made at its first delivery (a rotated secret's new keys at its next). */
  private keysOf(secret: string): SecretKeys {
    let k = this.keys.get(secret);
    if (!k) {
      k = new SecretKeys(secret);
      if (this.keys.size >= KEY_CACHE_SIZE) this.keys.clear();
      this.keys.set(secret, k);
    }
    return k;
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
