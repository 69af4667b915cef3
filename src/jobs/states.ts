/** Job states and the one table of legal transitions (DESIGN.md §2). */
export const JOB_STATUSES = ['queued', 'processing', 'completed', 'failed', 'cancelled'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

export const TERMINAL_STATUSES = ['completed', 'failed', 'cancelled'] as const;
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];

export const ACTIVE_STATUSES = ['queued', 'processing'] as const;

const NEXT: Record<JobStatus, readonly JobStatus[]> = {
  queued: ['processing', 'cancelled'],
  // processing → processing: a lease that expired (dead worker) is claimed again.
  // processing → queued: a worker shutting down hands the job back.
  // processing → failed also covers a job whose lease ran out too many times.
  processing: ['processing', 'queued', 'completed', 'failed', 'cancelled'],
  completed: [],
  failed: [],
  cancelled: [],
};

export function isTerminal(status: JobStatus): status is TerminalStatus {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

export function canTransition(from: JobStatus, to: JobStatus): boolean {
  return NEXT[from].includes(to);
}

/** Throws on a transition the state machine forbids: a programming error, never a client's. */
export function assertTransitions(from: readonly JobStatus[], to: JobStatus): void {
  for (const f of from) {
    if (!canTransition(f, to)) throw new Error(`illegal job transition ${f} → ${to}`);
  }
}
