import type { JobRow, JobView } from '../store/jobs.js';
import type { ApiJob, ErrorType, JobProgress } from '../contract/api.js';

export type { JobRow, JobView };

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export function isResultReady(row: Pick<JobRow, 'status' | 'result_key' | 'result_deleted_at'>): boolean {
  return row.status === 'completed' && row.result_key !== null && row.result_deleted_at === null;
}

/** The columns the public job object is made of. */
export type ApiJobSource = Pick<
  JobRow,
  | 'uuid'
  | 'job_type'
  | 'model'
  | 'status'
  | 'status_detail'
  | 'error_type'
  | 'error_message'
  | 'result_key'
  | 'result_deleted_at'
  | 'created_at'
  | 'started_at'
  | 'finished_at'
  | 'deadline'
  | 'priority'
  | 'progress'
  | 'data_removed_at'
>;

/** The stored progress JSON (written by the lifecycle's renew from a JobProgress), or null. */
export function parseProgress(json: string | null): JobProgress | null {
  if (json === null) return null;
  try {
    return JSON.parse(json) as JobProgress;
  } catch {
    return null;
  }
}

export function toApiJob(row: ApiJobSource): ApiJob {
  return {
    uuid: row.uuid,
    job_type: row.job_type,
    model: row.model,
    status: row.status,
    status_detail: row.status_detail,
    // The column holds only ERROR_TYPES values (written by jobs/changes.ts from typed failures).
    error_type: row.error_type as ErrorType | null,
    error_message: row.error_message,
    result_ready: isResultReady(row),
    created_at: iso(row.created_at)!,
    started_at: iso(row.started_at),
    finished_at: iso(row.finished_at),
    deadline: iso(row.deadline),
    priority: row.priority,
    progress: parseProgress(row.progress),
    data_removed: row.data_removed_at !== null,
  };
}
