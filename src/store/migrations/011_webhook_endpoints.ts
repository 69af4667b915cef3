import { sql, type Kysely } from 'kysely';

/**
 * Owner endpoints (every job's events without a webhook per submit) and their deliveries,
 * which are webhook_events rows with an endpoint_id. Each endpoint query reads a partial
 * index that holds only endpoint rows in the state it serves: never the per-job history.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('webhook_endpoints')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('owner', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('events', 'text', (c) => c.notNull())
    .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('secret', 'text', (c) => c.notNull())
    .addColumn('previous_secret', 'text')
    .addColumn('previous_secret_expires_at', 'bigint')
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('disabled_reason', 'text')
    .addColumn('disabled_at', 'bigint')
    .addColumn('failing_since', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  // An owner's endpoints, newest first (the list, and the fan-out at each terminal state).
  await db.schema
    .createIndex('webhook_endpoints_owner')
    .on('webhook_endpoints')
    .columns(['owner', 'created_at'])
    .execute();
  await db.schema.alterTable('webhook_events').addColumn('endpoint_id', 'text').execute();
  // An endpoint's delivery log, newest first.
  await db.schema
    .createIndex('webhook_events_endpoint')
    .on('webhook_events')
    .columns(['endpoint_id', 'created_at', 'event_id'])
    .where(sql<boolean>`endpoint_id IS NOT NULL`)
    .execute();
  // What recover may queue again: an endpoint's failed and skipped deliveries by event time.
  await db.schema
    .createIndex('webhook_events_endpoint_missed')
    .on('webhook_events')
    .columns(['endpoint_id', 'created_at'])
    .where(sql<boolean>`endpoint_id IS NOT NULL AND state IN ('failed', 'skipped')`)
    .execute();
  // What disabling skips, and what a URL change redirects: an endpoint's pending deliveries.
  await db.schema
    .createIndex('webhook_events_endpoint_pending')
    .on('webhook_events')
    .column('endpoint_id')
    .where(sql<boolean>`endpoint_id IS NOT NULL AND state = 'pending'`)
    .execute();
}
