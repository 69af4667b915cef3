import { EventEmitter } from 'node:events';

export type SignalName = 'job-queued' | 'job-cancelled' | 'job-finished';

/** Carries signals to other processes (PostgreSQL LISTEN/NOTIFY); absent on SQLite. */
export interface SignalTransport {
  publish(name: SignalName, arg: string): void;
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

  private send(name: SignalName, arg = ''): void {
    this.emit(name, arg);
    this.transport?.publish(name, arg);
  }

  /** A signal that came from another process: handled here, not sent on again. */
  deliver(name: SignalName, arg: string): void {
    this.emit(name, arg);
  }

  jobQueued(): void {
    this.send('job-queued');
  }
  jobCancelled(uuid: string): void {
    this.send('job-cancelled', uuid);
  }
  /** A job reached a terminal state (wakes the webhook dispatcher and long polls). */
  jobFinished(uuid: string): void {
    this.send('job-finished', uuid);
  }
}
