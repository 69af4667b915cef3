import { PostgresAdapter, sql, type Kysely } from 'kysely';
import type { Database } from './schema.js';

export interface FailedDelivery {
  event_id: string;
  job_uuid: string;
  owner: string;
  event_type: string;
  url: string;
  attempts: number;
  failed_at: number;
  last_status: number | null;
  last_error: string | null;
}

/**
 * The most recent failed webhook deliveries, across owners (operator view). Reads the partial
 * index `webhook_events_failed` (migration 007) from its newest end and stops after `limit` rows,
 * then the attempts of just those events: the cost does not grow with the table.
 */
export async function recentFailedDeliveries(db: Kysely<Database>, limit: number): Promise<FailedDelivery[]> {
  // SQLite's planner, without statistics, may prefer another index and then sort every failed row;
  // INDEXED BY pins the partial index. PostgreSQL picks it on its own (backward scan).
  const pinned = db.getExecutor().adapter instanceof PostgresAdapter ? sql`` : sql`INDEXED BY webhook_events_failed`;
  const { rows: events } = await sql<{
    event_id: string;
    job_uuid: string;
    owner: string;
    event_type: string;
    url: string;
    attempts: number;
    updated_at: number;
  }>`
    SELECT event_id, job_uuid, owner, event_type, url, attempts, updated_at FROM webhook_events ${pinned}
    WHERE state = 'failed' ORDER BY updated_at DESC, event_id DESC LIMIT ${limit}`.execute(db);
  if (events.length === 0) return [];
  const attempts = await db
    .selectFrom('webhook_attempts')
    .select(['event_id', 'attempt', 'id', 'http_status', 'error'])
    .where(
      'event_id',
      'in',
      events.map((e) => e.event_id),
    )
    .execute();
  const last = new Map<string, (typeof attempts)[number]>();
  for (const a of attempts) {
    const prev = last.get(a.event_id);
    if (!prev || a.id > prev.id) last.set(a.event_id, a);
  }
  return events.map((e) => ({
    event_id: e.event_id,
    job_uuid: e.job_uuid,
    owner: e.owner,
    event_type: e.event_type,
    url: e.url,
    attempts: e.attempts,
    failed_at: e.updated_at,
    last_status: last.get(e.event_id)?.http_status ?? null,
    last_error: last.get(e.event_id)?.error ?? null,
  }));
}
