import { EventEmitter } from 'node:events';
import type { RawBuilder } from 'kysely';
import { Wakeable } from './runtime/wake.js';

export const SIGNAL_NAMES = [
  'job-queued',
  'job-cancelled',
  'job-finished',
  'job-progress',
  'webhooks-due',
  'key-revoked',
] as const;
export type SignalName = (typeof SIGNAL_NAMES)[number];

/** Carries signals to other processes (PostgreSQL LISTEN/NOTIFY); absent on SQLite. */
export interface SignalTransport {
  publish(name: SignalName, arg: string): void;
  /**
   * Publishes from inside the caller's transaction (`db` is its Kysely handle): NOTIFY is
   * delivered at commit and never for a rollback, and costs no transaction of its own.
   */
  publishWithin?(db: unknown, signals: ReadonlyArray<readonly [SignalName, string]>): Promise<void>;
  /**
   * The same as one SQL expression (`pg_notify(…)`) to embed in another statement, so that the
   * statement and its NOTIFY need no transaction of their own; undefined when it does not fit one.
   */
  notifyExpression?(signals: ReadonlyArray<readonly [SignalName, string]>): RawBuilder<unknown> | undefined;
}

/**
 * Wake-ups between the API, the workers and the webhook dispatcher, in this process and (with a
 * transport) in every other process on the same database. They only make things faster: every
 * consumer also polls the database, so a lost signal delays work, never loses it.
 */
export class Signals extends EventEmitter {
  transport?: SignalTransport;

  constructor() {
    super();
    this.setMaxListeners(0);
  }

  /** Raised in this process only: a signal from another process, or one no other process needs. */
  deliver(name: SignalName, arg: string): void {
    this.emit(name, arg);
  }

  /**
   * The cross-process half of `signals`, sent inside a transaction (see SignalTransport); call
   * `deliverLocally` with the same list after the commit.
   */
  async publishWithin(db: unknown, signals: ReadonlyArray<readonly [SignalName, string]>): Promise<void> {
    if (signals.length > 0) await this.transport?.publishWithin?.(db, signals);
  }

  /** This process's half of signals already published with publishWithin. */
  deliverLocally(signals: ReadonlyArray<readonly [SignalName, string]>): void {
    const remote = this.transport?.publishWithin !== undefined;
    for (const [name, arg] of signals) {
      this.emit(name, arg);
      // A transport without in-transaction publishing still gets the signal, after commit.
      if (!remote) this.transport?.publish(name, arg);
    }
  }
}

/**
 * A Wakeable woken by a signal (only those whose argument `match`es, when given), until `close()`.
 * Subscribe before looking at the database, so a signal between the look and the wait is kept.
 */
export function wakeOn(
  signals: Signals,
  names: SignalName | readonly SignalName[],
  match?: (arg: string) => boolean,
): Wakeable & { close(): void } {
  const w = new Wakeable();
  const list = typeof names === 'string' ? [names] : names;
  const onSignal = (arg: string) => {
    if (!match || match(arg)) w.wake();
  };
  for (const n of list) signals.on(n, onSignal);
  return Object.assign(w, {
    close() {
      for (const n of list) signals.off(n, onSignal);
    },
  });
}
