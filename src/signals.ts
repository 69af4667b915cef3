import { EventEmitter } from 'node:events';
import type { RawBuilder } from 'kysely';

export type SignalName =
  'job-queued' | 'job-cancelled' | 'job-finished' | 'job-progress' | 'webhooks-due' | 'key-revoked';
export const SIGNAL_NAMES: readonly SignalName[] = [
  'job-queued',
  'job-cancelled',
  'job-finished',
  'job-progress',
  'webhooks-due',
  'key-revoked',
];

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
