import type { Logger } from 'pino';
import { OutageLog } from '../runtime/outage.js';
import { describeStorageError, isStorageFull, isStorageUnavailable } from './errors.js';
import type { ResultStore } from './types.js';

/** A readiness probe of the storage answers within this long. */
const PROBE_TIMEOUT_MS = 3_000;

/**
 * What this process has seen of its result storage: the workers report every upload's outcome;
 * /readyz asks `problem()`. While the storage is down, each /readyz probes it once (one probe in
 * flight at a time, bounded), so readiness comes back when the storage does, even with no job
 * uploading. One log line when an outage starts, one when it ends.
 */
export class StorageHealth {
  private reason: string | undefined;
  private probing: Promise<string | undefined> | undefined;
  private readonly outage: OutageLog;

  constructor(
    private readonly store: ResultStore,
    log?: Logger,
  ) {
    this.outage = new OutageLog(log, 'result storage', 'result uploads wait');
  }

  /** Records a failed storage operation; only outages and a full disk change the health. */
  failed(err: unknown): void {
    if (!isStorageUnavailable(err) && !isStorageFull(err)) return;
    this.reason = describeStorageError(err);
    this.outage.failed(err);
  }

  succeeded(): void {
    if (this.reason === undefined) return;
    this.reason = undefined;
    this.outage.succeeded();
  }

  /** Why the storage cannot take results now, or undefined when it can. */
  problem(): Promise<string | undefined> {
    if (this.reason === undefined) return Promise.resolve(undefined);
    this.probing ??= this.probe().finally(() => {
      this.probing = undefined;
    });
    return this.probing;
  }

  private async probe(): Promise<string | undefined> {
    const signal = AbortSignal.timeout(PROBE_TIMEOUT_MS);
    try {
      await this.store.check(signal);
      this.succeeded();
    } catch (err) {
      if (signal.aborted) this.reason = `result storage unavailable: no answer within ${PROBE_TIMEOUT_MS / 1000} s`;
      else this.failed(err);
    }
    return this.reason;
  }
}
