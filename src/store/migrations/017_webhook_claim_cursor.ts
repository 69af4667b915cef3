import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../store.js';

/**
 * The pending-destination index gets `event_id` as its last key column, so a dispatcher's claim can
 * start after the last event it claimed there, `(next_attempt_at, event_id)`: one seek, instead of
 * stepping over the rows it holds leased at the head of the destination's range (events queued or
 * in flight, and those whose attempts wait for their recording: about two per claimed event at the
 * dispatcher's claim-ahead), a heap fetch and a lease test each. On PostgreSQL the new index is
 * built before the old one is dropped (the build holds off writes, not reads); SQLite has no
 * ALTER INDEX … RENAME, and its DDL runs in the migration's transaction. PostgreSQL's claim takes
 * each destination's cursor beside its room (webhook_claim_rooms' new form: see migration 014);
 * the old form stays for processes of the previous release still running during an upgrade.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const create = (name: string) =>
    sql`CREATE INDEX ${sql.raw(name)} ON webhook_events (destination, next_attempt_at, event_id) WHERE state = 'pending'`;
  if (dialect === 'sqlite') {
    await sql`DROP INDEX webhook_events_pending_destination`.execute(db);
    await create('webhook_events_pending_destination').execute(db);
    return;
  }
  await create('webhook_events_pending_destination_2').execute(db);
  await sql`DROP INDEX webhook_events_pending_destination`.execute(db);
  await sql`ALTER INDEX webhook_events_pending_destination_2 RENAME TO webhook_events_pending_destination`.execute(db);
  await sql`CREATE FUNCTION webhook_claim_rooms(destinations text[], rooms int[], cursor_at bigint[], cursor_id text[])
    RETURNS TABLE (destination text, room int, after_at bigint, after_id text) LANGUAGE plpgsql STABLE ROWS 1
    AS 'BEGIN RETURN QUERY SELECT * FROM unnest(destinations, rooms, cursor_at, cursor_id); END'`.execute(db);
}
