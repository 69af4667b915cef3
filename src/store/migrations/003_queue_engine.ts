import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../store.js';

/**
 * Claims, queue position and queue depth at a cost that does not grow with the backlog:
 * partial indexes hold only the active rows, and triggers keep the per-state counts.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await virtualTime(db, dialect);
  await activeIndexes(db);
  await queueCounts(db);
  if (dialect === 'sqlite') await sqliteCountTriggers(db);
  else await postgresCountTriggers(db);
}

/** The virtual start time that orders the queue (fair between owners); a queue table's autovacuum. */
async function virtualTime(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await db.schema
    .alterTable('jobs')
    .addColumn('vtime', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
  if (dialect === 'postgres') {
    // A queue table churns: analyze and vacuum it after 2 % / 5 % of its rows change, not 10 % / 20 %.
    await sql`ALTER TABLE jobs SET (autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_scale_factor = 0.05)`.execute(
      db,
    );
  }
  // Jobs queued before this migration keep their submission order.
  await sql`UPDATE jobs SET vtime = created_at WHERE status = 'queued'`.execute(db);
}

/** Partial indexes of the active rows: what claims, queue position and recovery seek. */
async function activeIndexes(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('jobs_status_created').execute();
  const queued = sql<boolean>`status = 'queued'`;
  // Claims seek the head of each job type's queue; queue position counts what is ahead.
  await db.schema
    .createIndex('jobs_queue_type')
    .on('jobs')
    .columns(['job_type', 'vtime', 'created_at', 'uuid'])
    .where(queued)
    .execute();
  await db.schema.createIndex('jobs_queue').on('jobs').columns(['vtime', 'created_at', 'uuid']).where(queued).execute();
  // An owner's last queued job (the next submit's virtual start time).
  await db.schema.createIndex('jobs_queue_owner').on('jobs').columns(['owner', 'vtime']).where(queued).execute();
  // Expired leases (recovery) and running jobs per owner (OWNER_MAX_RUNNING).
  const processing = sql<boolean>`status = 'processing'`;
  await db.schema.createIndex('jobs_leases').on('jobs').column('lease_expires_at').where(processing).execute();
  await db.schema.createIndex('jobs_running_owner').on('jobs').column('owner').where(processing).execute();
  // GET /jobs?status=…: an owner's jobs in one state, newest first, without walking the others.
  await db.schema
    .createIndex('jobs_owner_status_created')
    .on('jobs')
    .columns(['owner', 'status', 'created_at'])
    .execute();
  // Result retention walks only live results, not every finished job ever.
  await db.schema.dropIndex('jobs_finished').execute();
  await db.schema
    .createIndex('jobs_live_results')
    .on('jobs')
    .column('finished_at')
    .where(sql<boolean>`status = 'completed' AND result_key IS NOT NULL AND result_deleted_at IS NULL`)
    .execute();
}

/** The per-state counts (queue depth), counted once here, kept by the triggers below. */
async function queueCounts(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('queue_counts')
    .addColumn('shard', 'integer', (c) => c.primaryKey())
    .addColumn('queued', 'bigint', (c) => c.notNull())
    .addColumn('processing', 'bigint', (c) => c.notNull())
    .execute();
  await sql`INSERT INTO queue_counts (shard, queued, processing)
    SELECT 0, count(CASE WHEN status = 'queued' THEN 1 END), count(CASE WHEN status = 'processing' THEN 1 END) FROM jobs`.execute(
    db,
  );
}

/**
 * One writer at a time on SQLite: one row, row-level triggers.
 */
async function sqliteCountTriggers(db: Kysely<unknown>): Promise<void> {
  const delta = (row: 'NEW' | 'OLD', sign: '+' | '-') =>
    `queued = queued ${sign} (${row}.status = 'queued'), processing = processing ${sign} (${row}.status = 'processing')`;
  await sql
    .raw(
      `CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs WHEN NEW.status IN ('queued', 'processing')
       BEGIN UPDATE queue_counts SET ${delta('NEW', '+')} WHERE shard = 0; END`,
    )
    .execute(db);
  await sql
    .raw(
      `CREATE TRIGGER jobs_count_update AFTER UPDATE OF status ON jobs
       WHEN OLD.status <> NEW.status AND (OLD.status IN ('queued', 'processing') OR NEW.status IN ('queued', 'processing'))
       BEGIN UPDATE queue_counts SET
         queued = queued + (NEW.status = 'queued') - (OLD.status = 'queued'),
         processing = processing + (NEW.status = 'processing') - (OLD.status = 'processing')
       WHERE shard = 0; END`,
    )
    .execute(db);
  await sql
    .raw(
      `CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs WHEN OLD.status IN ('queued', 'processing')
       BEGIN UPDATE queue_counts SET ${delta('OLD', '-')} WHERE shard = 0; END`,
    )
    .execute(db);
}

/**
 * Concurrent writers on PostgreSQL: 16 shards (a transaction updates its backend's shard,
 * one row, so two transactions never lock two shards in opposite orders), and
 * statement-level triggers, so a batch claim or a bulk insert updates a shard once.
 */
async function postgresCountTriggers(db: Kysely<unknown>): Promise<void> {
  await sql`INSERT INTO queue_counts (shard, queued, processing) SELECT g, 0, 0 FROM generate_series(1, 15) g`.execute(
    db,
  );
  const fn = (name: string, body: string) =>
    sql
      .raw(
        `CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
         DECLARE dq bigint; dp bigint;
         BEGIN
           ${body}
           IF dq <> 0 OR dp <> 0 THEN
             UPDATE queue_counts SET queued = queued + dq, processing = processing + dp WHERE shard = pg_backend_pid() % 16;
           END IF;
           RETURN NULL;
         END $$`,
      )
      .execute(db);
  const count = (table: string) =>
    `SELECT count(*) FILTER (WHERE status = 'queued'), count(*) FILTER (WHERE status = 'processing') FROM ${table}`;
  await fn('media_jobs_count_insert', `${count('new_rows')} INTO dq, dp;`);
  await fn('media_jobs_count_delete', `${count('old_rows')} INTO dq, dp; dq := -dq; dp := -dp;`);
  await fn(
    'media_jobs_count_update',
    `SELECT coalesce(sum((n.status = 'queued')::int - (o.status = 'queued')::int), 0),
            coalesce(sum((n.status = 'processing')::int - (o.status = 'processing')::int), 0)
     INTO dq, dp FROM new_rows n JOIN old_rows o ON o.uuid = n.uuid WHERE o.status <> n.status;`,
  );
  await sql
    .raw(
      `CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION media_jobs_count_insert()`,
    )
    .execute(db);
  await sql
    .raw(
      `CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION media_jobs_count_delete()`,
    )
    .execute(db);
  await sql
    .raw(
      `CREATE TRIGGER jobs_count_update AFTER UPDATE ON jobs REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION media_jobs_count_update()`,
    )
    .execute(db);
}
