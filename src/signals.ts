import { EventEmitter } from 'node:events';

/**
 * In-process wake-ups between the API, the workers and the webhook dispatcher. They only make
 * things faster: every consumer also polls the database, so a lost signal delays, never loses.
 */
export class Signals extends EventEmitter {
  constructor() {
    super();
    this.setMaxListeners(0);
  }
  jobQueued(): void {
    this.emit('job-queued');
  }
  jobCancelled(uuid: string): void {
    this.emit('job-cancelled', uuid);
  }
  /** A job reached a terminal state (wakes the webhook dispatcher and long-polls). */
  jobFinished(uuid: string): void {
    this.emit('job-finished', uuid);
  }
}
