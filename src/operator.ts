import type { Clock } from './clock.js';
import type { Store } from './store/store.js';
import { findActiveAdminToken } from './store/admin-tokens.js';
import { recentFailedDeliveries, type FailedDelivery } from './store/failed-deliveries.js';
import { countActive } from './store/jobs.js';
import { recentlyDisabledEndpoints, type EndpointRow } from './store/webhook-endpoints.js';
import { createKey, listKeys, revokeKey } from './store/keys.js';
import { finishedPerMinute } from './store/totals.js';
import { listWorkerTokens } from './store/worker-tokens.js';

export interface RemoteWorkerInfo {
  id: string;
  name: string;
  /** The job types the token may claim; `["*"]` for every declared remote type. */
  job_types: string[];
  created_at: number;
  revoked_at: number | null;
  /** The token's last call to /api/v1/worker (written at most every few seconds per process). */
  last_seen_at: number | null;
}

/**
 * The operator's reads and writes (the admin routes and dashboard): queue depth, API keys, remote
 * workers, failed deliveries, admin-token checks. One module between the admin routes and the store.
 */
export class Operator {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {}

  /** True when `token` is an active admin token (mja_…). */
  async isAdmin(token: string): Promise<boolean> {
    return (await findActiveAdminToken(this.store.db, token)) !== undefined;
  }

  /** Jobs queued and running, from the trigger-maintained counters. */
  queueDepth(): Promise<Record<'queued' | 'processing', number>> {
    return countActive(this.store.db);
  }

  /** Jobs finished per minute in Unix minutes from..to, across the cluster (minute → jobs). */
  finishedPerMinute(from: number, to: number): Promise<Map<number, number>> {
    return finishedPerMinute(this.store.db, from, to);
  }

  listKeys() {
    return listKeys(this.store.db);
  }

  createKey(owner: string) {
    return createKey(this.store.db, owner, this.clock.now());
  }

  /** False when there is no active key with this id. */
  revokeKey(id: string): Promise<boolean> {
    return revokeKey(this.store.db, id, this.clock.now());
  }

  /** Remote workers (their tokens). */
  async remoteWorkers(): Promise<RemoteWorkerInfo[]> {
    const tokens = await listWorkerTokens(this.store.db);
    return tokens.map((t) => ({
      id: t.id,
      name: t.name,
      job_types: t.job_types.length === 0 ? ['*'] : t.job_types,
      created_at: t.created_at,
      revoked_at: t.revoked_at,
      last_seen_at: t.last_seen_at,
    }));
  }

  /** The newest deliveries that failed for good. */
  failedDeliveries(limit: number): Promise<FailedDelivery[]> {
    return recentFailedDeliveries(this.store.db, limit);
  }

  /** Owner endpoints disabled (410 Gone, or failing too long), most recently disabled first. */
  disabledEndpoints(limit: number): Promise<EndpointRow[]> {
    return recentlyDisabledEndpoints(this.store.db, limit);
  }
}
