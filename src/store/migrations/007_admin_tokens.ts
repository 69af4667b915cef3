import { sql, type Kysely } from 'kysely';

/**
 * Operator tokens for /admin/api and the dashboard's operator view (only hashes are stored),
 * and a partial index so the failed-delivery overview reads only failed events, newest first.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('admin_tokens')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('prefix', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('revoked_at', 'bigint')
    .execute();
  await db.schema
    .createIndex('webhook_events_failed')
    .on('webhook_events')
    .columns(['updated_at', 'event_id'])
    .where(sql<boolean>`state = 'failed'`)
    .execute();
}
