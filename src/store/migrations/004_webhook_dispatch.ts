import { sql, type Kysely } from 'kysely';

/**
 * Due deliveries by destination, pending ones only: the dispatcher's claims and its skip scan
 * over destinations are index seeks that never touch the delivered history.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  // Rows written before `destination` was always set: give them their URL as destination.
  await sql`UPDATE webhook_events SET destination = url WHERE destination IS NULL AND state = 'pending'`.execute(db);
  await sql`CREATE INDEX webhook_events_pending_destination ON webhook_events (destination, next_attempt_at) WHERE state = 'pending'`.execute(
    db,
  );
}
