import { Backoff, OUTAGE_BACKOFF } from '../runtime/backoff.js';
import { Wakeable } from '../runtime/wake.js';
import { JobError } from '../errors.js';
import { isStorageFull, isStorageUnavailable } from '../storage/errors.js';
import type { StorageHealth } from '../storage/health.js';
import type { ResultStore } from '../storage/types.js';

export interface StoreResultOptions {
  results: ResultStore;
  health: StorageHealth;
  /** The job's signal: its timeout, a cancel or shutdown end the wait. */
  signal: AbortSignal;
  /** Called once when the first attempt meets an outage (the job's status_detail says so). */
  onWait?: () => void;
}

/**
 * Stores a finished job's result. Through a storage outage it retries with the one Backoff (100 ms
 * doubling to 5 s) for as long as the job may run: an outage shorter than the job's timeout fails
 * no job, a longer one ends it as `timeout` (the job's own timer aborts `signal`). A full results
 * disk fails the job at once with a message that says so (the partial file is gone, see
 * LocalResultStore.put); any other error is the caller's (internal_error).
 */
export async function storeResult(
  key: string,
  out: { bytes: Buffer; contentType: string },
  { results, health, signal, onWait }: StoreResultOptions,
): Promise<void> {
  const backoff = new Backoff(OUTAGE_BACKOFF);
  for (let attempt = 1; ; attempt++) {
    signal.throwIfAborted();
    try {
      await results.put(key, out.bytes, out.contentType, signal);
      health.succeeded();
      return;
    } catch (err) {
      signal.throwIfAborted();
      health.failed(err);
      if (isStorageFull(err))
        throw new JobError('internal_error', 'the result could not be stored: the results disk is full');
      if (!isStorageUnavailable(err)) throw err;
      if (attempt === 1) onWait?.();
      await Wakeable.sleep(backoff.next(), signal);
      // The caller reads why from the signal's reason.
      signal.throwIfAborted();
    }
  }
}
