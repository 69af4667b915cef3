import { type Kysely } from 'kysely';

/**
 * Fixed-window request counters, shared by every API process on the same database.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('rate_limits')
    .addColumn('bucket', 'text', (c) => c.primaryKey())
    .addColumn('count', 'integer', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('rate_limits_expires').on('rate_limits').column('expires_at').execute();
}
