import type { ResultStore } from '../storage/types.js';
import type { JobLifecycle } from './lifecycle.js';

/**
 * Purges a finished job's data (DELETE /jobs/{uuid}, retention): erase what the database holds
 * and stop handing out the result (one change), delete the result blob, then mark the job a
 * tombstone (a second change). If the storage fails between the two, the job is left erased, its
 * result refused (410), `data_removed` still false and its purge due at once: housekeeping retries
 * it (jobs_purges), so no job ever claims `data_removed` while its blob can still be fetched.
 * False when there was nothing to purge (not a finished job of `owner`, or already purged).
 */
export async function purgeJob(
  deps: { lifecycle: JobLifecycle; results: ResultStore },
  uuid: string,
  owner?: string,
): Promise<boolean> {
  const row = await deps.lifecycle.purge(uuid, owner);
  if (!row) return false;
  if (row.result_key !== null) await deps.results.delete(row.result_key);
  await deps.lifecycle.purged(uuid);
  return true;
}
