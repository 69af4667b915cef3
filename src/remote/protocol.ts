/**
 * The shapes the remote worker protocol sends (docs/workers.md), shared by the service and the
 * worker SDK: types only, so the SDK loads none of the service's code.
 */

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
