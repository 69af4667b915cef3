/**
 * The contract, remote worker protocol (/api/v1/worker, docs/workers.md): what each call sends and
 * answers, and how often a lease holder renews its lease. The service's routes and the worker SDK
 * both use these, so the SDK loads none of the service's code.
 */
import type { ErrorType, JobProgress } from './api.js';

/**
 * How often a lease holder renews its lease: a third of it, so two renewals may fail before it
 * lapses (at most `atMostMs`; never more often than every 100 ms).
 */
export function heartbeatEveryMs(leaseMs: number, atMostMs = Infinity): number {
  return Math.max(100, Math.min(atMostMs, Math.floor(leaseMs / 3)));
}

/** A claimed job, as POST /api/v1/worker/claim answers it. */
export interface ClaimedJob {
  uuid: string;
  job_type: string;
  model: string;
  /** 1 for the first attempt; higher after a lost lease or a retryable failure. */
  attempt: number;
  /** The client's input, each media slot replaced by signed URLs of the service's staged copies. */
  input: Record<string, unknown>;
  /** The attempt's credential: sent with every call about the job. */
  lease_token: string;
  lease_expires_at: string;
  timeout_at: string;
}

/** POST /worker/claim: `job` is null when none came within `wait` seconds. */
export interface ClaimAnswer {
  job: ClaimedJob | null;
}

/** POST /worker/jobs/{uuid}/heartbeat. */
export interface HeartbeatRequest {
  lease_token: string;
  status_detail?: string;
  progress?: Pick<JobProgress, 'stage' | 'percent'> & Partial<Pick<JobProgress, 'current' | 'total'>>;
}
export interface HeartbeatAnswer {
  lease_expires_at: string;
  cancel_requested: boolean;
}

/** PUT /worker/jobs/{uuid}/output: what the service made of the bytes. */
export interface OutputAnswer {
  content_type: string;
  size: number;
}

/** POST /worker/jobs/{uuid}/fail. */
export interface FailRequest {
  lease_token: string;
  error_type: ErrorType;
  /** Shown to the client (at most 1000 characters). */
  error_message: string;
  /** Another attempt may succeed: the job goes back to the queue while attempts are left. */
  retryable?: boolean;
}

/** The body of complete and release. */
export interface LeaseRequest {
  lease_token: string;
}

/** The job's status after complete, fail (queued again when retried) and release. */
export interface CompleteAnswer {
  status: 'completed';
}
export interface FailAnswer {
  status: 'failed' | 'queued';
}
export interface ReleaseAnswer {
  status: 'queued';
}
