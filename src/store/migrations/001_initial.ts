import { type Kysely } from 'kysely';
import type { Dialect } from '../store.js';

/** The first schema: keys, jobs, idempotency, settings and webhook deliveries. */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await apiKeys(db);
  await jobs(db);
  await idempotencyKeys(db);
  await settings(db);
  await webhookEvents(db);
  await webhookAttempts(db, dialect);
}

/** API keys (only their hashes). */
async function apiKeys(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('owner', 'text', (c) => c.notNull())
    .addColumn('key_hash', 'text', (c) => c.notNull().unique())
    .addColumn('prefix', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('revoked_at', 'bigint')
    .execute();
}

/** The jobs, one row each. */
async function jobs(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('jobs')
    .addColumn('uuid', 'text', (c) => c.primaryKey())
    .addColumn('owner', 'text', (c) => c.notNull())
    .addColumn('job_type', 'text', (c) => c.notNull())
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('input', 'text', (c) => c.notNull())
    .addColumn('webhook', 'text')
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('status_detail', 'text', (c) => c.notNull())
    .addColumn('error_type', 'text')
    .addColumn('error_message', 'text')
    .addColumn('result_key', 'text')
    .addColumn('result_content_type', 'text')
    .addColumn('result_size', 'bigint')
    .addColumn('result_deleted_at', 'bigint')
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('lease_owner', 'text')
    .addColumn('lease_expires_at', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('started_at', 'bigint')
    .addColumn('finished_at', 'bigint')
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  // The claim query walks this index: active jobs in submission order.
  await db.schema.createIndex('jobs_status_created').on('jobs').columns(['status', 'created_at']).execute();
  await db.schema.createIndex('jobs_owner_created').on('jobs').columns(['owner', 'created_at']).execute();
  await db.schema.createIndex('jobs_finished').on('jobs').columns(['finished_at']).execute();
}

/** Stored answers of submits with an Idempotency-Key. */
async function idempotencyKeys(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('idempotency_keys')
    .addColumn('owner', 'text', (c) => c.notNull())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('fingerprint', 'text', (c) => c.notNull())
    .addColumn('response_status', 'integer', (c) => c.notNull())
    .addColumn('response_body', 'text', (c) => c.notNull())
    .addColumn('request_id', 'text', (c) => c.notNull())
    .addColumn('job_uuid', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('idempotency_keys_pk', ['owner', 'key'])
    .execute();
  await db.schema.createIndex('idempotency_expires').on('idempotency_keys').column('expires_at').execute();
}

/** Values every process on the database shares (secrets created once). */
async function settings(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('settings')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('value', 'text', (c) => c.notNull())
    .execute();
}

/** Webhook deliveries, one row per event (the outbox). */
async function webhookEvents(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('webhook_events')
    .addColumn('event_id', 'text', (c) => c.primaryKey())
    .addColumn('job_uuid', 'text', (c) => c.notNull())
    .addColumn('owner', 'text', (c) => c.notNull())
    .addColumn('event_type', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    // The URL's origin: the dispatcher caps deliveries in flight per destination.
    .addColumn('destination', 'text')
    .addColumn('secret', 'text')
    .addColumn('body', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', 'bigint')
    .addColumn('lease_owner', 'text')
    .addColumn('lease_expires_at', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('webhook_events_due')
    .on('webhook_events')
    .columns(['state', 'next_attempt_at'])
    .execute();
  await db.schema.createIndex('webhook_events_job').on('webhook_events').column('job_uuid').execute();
}

/** Each delivery attempt of a webhook event. */
async function webhookAttempts(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('webhook_attempts')
    .addColumn('id', dialect === 'postgres' ? 'bigserial' : 'integer', (c) =>
      dialect === 'postgres' ? c.primaryKey() : c.primaryKey().autoIncrement(),
    )
    .addColumn('event_id', 'text', (c) => c.notNull())
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('started_at', 'bigint', (c) => c.notNull())
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    .addColumn('http_status', 'integer')
    .addColumn('error', 'text')
    .addColumn('ok', 'integer', (c) => c.notNull())
    .addColumn('manual', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.createIndex('webhook_attempts_event').on('webhook_attempts').column('event_id').execute();
}
