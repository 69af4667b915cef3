import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import type { Signals } from '../signals.js';
import type { ResultStore } from '../storage/types.js';
import type { Store } from '../store/db.js';
import { purgeIdempotencyKeys } from '../store/idempotency.js';
import { purgeRateLimits } from '../store/rate-limits.js';
import { exhaustedJobs, expiredResults, markResultDeleted, transition } from '../store/jobs.js';

export interface MaintenanceDeps {
  store: Store;
  config: Config;
  clock: Clock;
  results: ResultStore;
  signals: Signals;
  log: Logger;
}

/**
 * Periodic housekeeping, safe to run in every process at once: purge expired idempotency keys,
 * delete results past RESULT_RETENTION, and fail jobs whose worker died JOB_MAX_ATTEMPTS times.
 */
export async function runMaintenance(deps: MaintenanceDeps): Promise<void> {
  const { store, config, clock, results, signals, log } = deps;
  const now = clock.now();
  await purgeRateLimits(store.db, now);
  const purged = await purgeIdempotencyKeys(store.db, now);
  if (purged > 0) log.info({ purged }, 'purged expired idempotency keys');

  for (const r of await expiredResults(store.db, now - config.resultRetentionMs)) {
    await results.delete(r.result_key!);
    await markResultDeleted(store.db, r.uuid, now);
  }

  for (const uuid of await exhaustedJobs(store.db, now, config.jobMaxAttempts)) {
    const row = await transition(store.db, uuid, {
      from: ['processing'],
      to: 'failed',
      leaseExpiredBefore: now,
      now,
      set: {
        status_detail: 'failed',
        error_type: 'internal_error',
        error_message: `the worker running this job stopped responding ${config.jobMaxAttempts} times`,
      },
      firstWebhookDelayMs: config.webhookRetryScheduleMs[0],
    });
    if (row) {
      signals.jobFinished(uuid);
      log.warn({ job_uuid: uuid }, 'job failed: attempts exhausted');
    }
  }
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
