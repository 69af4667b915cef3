import { type Kysely } from 'kysely';

/**
 * Worker tokens (hashes only) and the blobs of running remote attempts (staged inputs, uploaded output).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('worker_tokens')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('prefix', 'text', (c) => c.notNull())
    .addColumn('job_types', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('revoked_at', 'bigint')
    .addColumn('last_seen_at', 'bigint')
    .execute();
  await db.schema
    .createTable('staged_blobs')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('job_uuid', 'text', (c) => c.notNull())
    .addColumn('lease_owner', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('content_type', 'text', (c) => c.notNull())
    .addColumn('size', 'bigint', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('staged_blobs_job').on('staged_blobs').columns(['job_uuid', 'lease_owner']).execute();
}
