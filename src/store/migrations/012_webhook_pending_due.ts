import { sql, type Kysely } from 'kysely';

/**
 * The next due time (the dispatcher's sleep) from an index of pending events only, in place of
 * webhook_events_due (state, next_attempt_at) over every event: recording an attempt then removes
 * the event's entry, where the old index had it deleted and inserted again under its new state,
 * and the index no longer grows with the delivered history. No query looks events up by state
 * alone (the failed list has webhook_events_failed; an endpoint's have their own).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX webhook_events_due`.execute(db);
  await sql`CREATE INDEX webhook_events_pending_due ON webhook_events (next_attempt_at) WHERE state = 'pending'`.execute(
    db,
  );
}
