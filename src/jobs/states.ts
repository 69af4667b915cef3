/** Job states and the one table of legal transitions (docs/api.md, States). */
import { ACTIVE_STATUSES, JOB_STATUSES, TERMINAL_STATUSES, type JobStatus, type TerminalStatus } from '../contract.js';

export { ACTIVE_STATUSES, JOB_STATUSES, TERMINAL_STATUSES, type JobStatus, type TerminalStatus };

const NEXT: Record<JobStatus, readonly JobStatus[]> = {
  queued: ['processing', 'cancelled'],
  // processing → processing: the lease holder renews its lease.
  // processing → queued: a worker hands the job back, retries it, or its lease ran out.
  // processing → failed also covers a job whose lease ran out too many times.
  // Each move that uses these is described in changes.ts.
  processing: ['processing', 'queued', 'completed', 'failed', 'cancelled'],
  completed: [],
  failed: [],
  cancelled: [],
};

export function isTerminal(status: JobStatus): status is TerminalStatus {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

/**
 * Whether `to` may follow `from`. `unchanged` is a change that keeps the status, which only a
 * finished job may undergo: the purge of its data (DELETE, retention; changes.ts purge, purged).
 * A terminal status itself never changes.
 */
export function canTransition(from: JobStatus, to: JobStatus | 'unchanged'): boolean {
  return to === 'unchanged' ? isTerminal(from) : NEXT[from].includes(to);
}

/** Throws on a transition the state machine forbids: a programming error, never a client's. */
export function assertTransitions(from: readonly JobStatus[], to: JobStatus | 'unchanged'): void {
  for (const f of from) {
    if (!canTransition(f, to)) throw new Error(`illegal job transition ${f} → ${to}`);
  }
}
