import type { Kysely } from 'kysely';
import type { Dialect } from '../store.js';
import * as initial from './001_initial.js';
import * as rateLimits from './002_rate_limits.js';
import * as queueEngine from './003_queue_engine.js';
import * as webhookDispatch from './004_webhook_dispatch.js';
import * as dropRateLimits from './005_drop_rate_limits.js';
import * as adminTokens from './007_admin_tokens.js';
import * as remoteWorkers from './008_remote_workers.js';
import * as jobsRound2 from './009_jobs_round2.js';
import * as clusterCounters from './010_cluster_counters.js';
import * as webhookEndpoints from './011_webhook_endpoints.js';
import * as webhookPendingDue from './012_webhook_pending_due.js';
import * as webhookEventsFillfactor from './013_webhook_events_fillfactor.js';
import * as webhookClaimRooms from './014_webhook_claim_rooms.js';
import * as webhookAttemptsLogged from './015_webhook_attempts_logged.js';
import * as webhookEventsJobHash from './016_webhook_events_job_hash.js';
import * as webhookClaimCursor from './017_webhook_claim_cursor.js';

/** A migration's step; the same module serves both dialects (the few differences branch on it). */
export type Up = (db: Kysely<unknown>, dialect: Dialect) => Promise<void>;

/**
 * Every migration, in the order it applies (one module each, named as it is recorded). A name is
 * what existing databases hold in schema_migrations: once released it never changes, and a new
 * migration is a new module at the end. (006 was never released.)
 */
export const MIGRATIONS: readonly (readonly [name: string, up: Up])[] = [
  ['001_initial', initial.up],
  ['002_rate_limits', rateLimits.up],
  ['003_queue_engine', queueEngine.up],
  ['004_webhook_dispatch', webhookDispatch.up],
  ['005_drop_rate_limits', dropRateLimits.up],
  ['007_admin_tokens', adminTokens.up],
  ['008_remote_workers', remoteWorkers.up],
  ['009_jobs_round2', jobsRound2.up],
  ['010_cluster_counters', clusterCounters.up],
  ['011_webhook_endpoints', webhookEndpoints.up],
  ['012_webhook_pending_due', webhookPendingDue.up],
  ['013_webhook_events_fillfactor', webhookEventsFillfactor.up],
  ['014_webhook_claim_rooms', webhookClaimRooms.up],
  ['015_webhook_attempts_logged', webhookAttemptsLogged.up],
  ['016_webhook_events_job_hash', webhookEventsJobHash.up],
  ['017_webhook_claim_cursor', webhookClaimCursor.up],
];
