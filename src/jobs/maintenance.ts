import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import type { JobLifecycle } from './lifecycle.js';
import type { ResultStore } from '../storage/types.js';
import type { Store } from '../store/db.js';
import { purgeIdempotencyKeys } from '../store/idempotency.js';
import { expiredResults, markResultDeleted } from '../store/jobs.js';

export interface MaintenanceDeps {
  store: Store;
  config: Config;
  clock: Clock;
  results: ResultStore;
  lifecycle: JobLifecycle;
  log: Logger;
}

/**
 * Periodic housekeeping, safe to run in every process at once: purge expired idempotency keys,
 * delete results past RESULT_RETENTION, and recover jobs whose lease expired (back to the queue,
 * or failed once their worker died JOB_MAX_ATTEMPTS times) even where no worker runs.
 */
export async function runMaintenance(deps: MaintenanceDeps): Promise<void> {
  const { store, config, clock, results, lifecycle, log } = deps;
  const now = clock.now();
  const purged = await purgeIdempotencyKeys(store.db, now);
  if (purged > 0) log.info({ purged }, 'purged expired idempotency keys');

  for (const r of await expiredResults(store.db, now - config.resultRetentionMs)) {
    await results.delete(r.result_key!);
    await markResultDeleted(store.db, r.uuid, now);
  }

  await lifecycle.recoverExpired();
}

/** Runs maintenance now and then every `intervalMs`; returns a stop function. */
export function scheduleMaintenance(deps: MaintenanceDeps): () => Promise<void> {
  let running: Promise<void> = Promise.resolve();
  const tick = () => {
    running = runMaintenance(deps).catch((err) => deps.log.error({ err }, 'maintenance failed'));
  };
  tick();
  const timer = setInterval(tick, deps.config.maintenanceIntervalMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
  };
}
