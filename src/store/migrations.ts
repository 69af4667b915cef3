import { Kysely, Migrator, sql, type Migration, type MigrationProvider } from 'kysely';
import type { Dialect } from './store.js';

/** Migrations live in code so the compiled service carries them; each works on both dialects. */
function migrations(dialect: Dialect): Record<string, Migration> {
  return {
    '001_initial': {
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('api_keys')
          .addColumn('id', 'text', (c) => c.primaryKey())
          .addColumn('owner', 'text', (c) => c.notNull())
          .addColumn('key_hash', 'text', (c) => c.notNull().unique())
          .addColumn('prefix', 'text', (c) => c.notNull())
          .addColumn('created_at', 'bigint', (c) => c.notNull())
          .addColumn('revoked_at', 'bigint')
          .execute();

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

        await db.schema
          .createTable('settings')
          .addColumn('name', 'text', (c) => c.primaryKey())
          .addColumn('value', 'text', (c) => c.notNull())
          .execute();

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
      },
    },
    '002_rate_limits': {
      // Fixed-window request counters, shared by every API process on the same database.
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('rate_limits')
          .addColumn('bucket', 'text', (c) => c.primaryKey())
          .addColumn('count', 'integer', (c) => c.notNull())
          .addColumn('expires_at', 'bigint', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('rate_limits_expires').on('rate_limits').column('expires_at').execute();
      },
    },
    '003_queue_engine': {
      // Claims, queue position and queue depth at a cost that does not grow with the backlog:
      // partial indexes hold only the active rows, and triggers keep the per-state counts.
      async up(db: Kysely<unknown>) {
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
        await db.schema.dropIndex('jobs_status_created').execute();
        const queued = sql<boolean>`status = 'queued'`;
        // Claims seek the head of each job type's queue; queue position counts what is ahead.
        await db.schema
          .createIndex('jobs_queue_type')
          .on('jobs')
          .columns(['job_type', 'vtime', 'created_at', 'uuid'])
          .where(queued)
          .execute();
        await db.schema
          .createIndex('jobs_queue')
          .on('jobs')
          .columns(['vtime', 'created_at', 'uuid'])
          .where(queued)
          .execute();
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
        if (dialect === 'sqlite') {
          // One writer at a time on SQLite: one row, row-level triggers.
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
        } else {
          // Concurrent writers on PostgreSQL: 16 shards (a transaction updates its backend's shard,
          // one row, so two transactions never lock two shards in opposite orders), and
          // statement-level triggers, so a batch claim or a bulk insert updates a shard once.
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
      },
    },
    '005_drop_rate_limits': {
      // Rate limits moved to @fastify/rate-limit (Redis or process memory): no per-request write.
      async up(db: Kysely<unknown>) {
        await db.schema.dropTable('rate_limits').ifExists().execute();
      },
    },
    '004_webhook_dispatch': {
      // Due deliveries by destination, pending ones only: the dispatcher's claims and its skip scan
      // over destinations are index seeks that never touch the delivered history.
      async up(db: Kysely<unknown>) {
        // Rows written before `destination` was always set: give them their URL as destination.
        await sql`UPDATE webhook_events SET destination = url WHERE destination IS NULL AND state = 'pending'`.execute(
          db,
        );
        await sql`CREATE INDEX webhook_events_pending_destination ON webhook_events (destination, next_attempt_at) WHERE state = 'pending'`.execute(
          db,
        );
      },
    },
    '007_admin_tokens': {
      // Operator tokens for /admin/api and the dashboard's operator view (only hashes are stored),
      // and a partial index so the failed-delivery overview reads only failed events, newest first.
      async up(db: Kysely<unknown>) {
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
      },
    },
    '008_remote_workers': {
      // Worker tokens (hashes only) and the blobs of running remote attempts (staged inputs, uploaded output).
      async up(db: Kysely<unknown>) {
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
        await db.schema
          .createIndex('staged_blobs_job')
          .on('staged_blobs')
          .columns(['job_uuid', 'lease_owner'])
          .execute();
      },
    },
    '009_jobs_round2': {
      // Deadlines, retention and deletion, structured progress and priority. Each
      // background step finds its rows by a partial index that holds only the rows it serves.
      async up(db: Kysely<unknown>) {
        for (const [name, type, notNull] of [
          ['deadline', 'bigint', false],
          ['priority', 'integer', true],
          ['rank', 'bigint', true],
          ['retention_ms', 'bigint', false],
          ['purge_at', 'bigint', false],
          ['data_removed_at', 'bigint', false],
          ['progress', 'text', false],
        ] as const) {
          await db.schema
            .alterTable('jobs')
            .addColumn(name, type, (c) => (notNull ? c.notNull().defaultTo(0) : c))
            .execute();
        }
        // Queued jobs keep their order: rank is created_at for priority 0.
        await sql`UPDATE jobs SET rank = created_at WHERE status = 'queued'`.execute(db);
        // Finished jobs from before: purged 7 days (the default RESULT_RETENTION) after they
        // finished; the result-retention step still applies a shorter RESULT_RETENTION to results.
        await sql`UPDATE jobs SET purge_at = finished_at + 604800000
          WHERE status IN ('completed', 'failed', 'cancelled') AND finished_at IS NOT NULL`.execute(db);
        // Deadlines of active jobs, soonest first (the deadline step, every second).
        await db.schema
          .createIndex('jobs_deadlines')
          .on('jobs')
          .column('deadline')
          .where(sql<boolean>`deadline IS NOT NULL AND status IN ('queued', 'processing')`)
          .execute();
        // Purges due (retention) or to retry (a DELETE whose storage was down), soonest first.
        await db.schema
          .createIndex('jobs_purges')
          .on('jobs')
          .column('purge_at')
          .where(sql<boolean>`purge_at IS NOT NULL`)
          .execute();
        // An owner's queued jobs of one type by rank: a claim takes the best-ranked one into the
        // owner's earliest slot (priority reorders an owner's jobs, never the owners).
        await db.schema
          .createIndex('jobs_queue_rank')
          .on('jobs')
          .columns(['owner', 'job_type', 'rank', 'uuid'])
          .where(sql<boolean>`status = 'queued'`)
          .execute();
      },
    },
    '010_cluster_counters': {
      // The cluster's submitted and finished totals, and finished jobs per minute, kept by the
      // triggers that keep queue depth (004_queue_engine's pattern), so /metrics and the operator
      // view of any process read the whole cluster in a few rows. On PostgreSQL the existing
      // statement-level functions are extended (one trigger call per statement, as before), and
      // every row they touch is in the writer backend's shard, taken after its queue_counts row:
      // no new hot row, no new lock order.
      async up(db: Kysely<unknown>) {
        await db.schema
          .createTable('job_totals')
          .addColumn('shard', 'integer', (c) => c.notNull())
          .addColumn('job_type', 'text', (c) => c.notNull())
          .addColumn('event', 'text', (c) => c.notNull())
          .addColumn('n', 'bigint', (c) => c.notNull())
          .addPrimaryKeyConstraint('job_totals_pk', ['shard', 'job_type', 'event'])
          .execute();
        await db.schema
          .createTable('job_finish_minutes')
          .addColumn('shard', 'integer', (c) => c.notNull())
          .addColumn('slot', 'integer', (c) => c.notNull())
          .addColumn('minute', 'bigint', (c) => c.notNull())
          .addColumn('n', 'bigint', (c) => c.notNull())
          .addPrimaryKeyConstraint('job_finish_minutes_pk', ['shard', 'slot'])
          .execute();
        // Writers wait while the totals are counted (one scan of jobs, once), so none is missed or
        // counted twice. The per-minute ring starts empty.
        if (dialect === 'postgres') await sql`LOCK TABLE jobs IN SHARE ROW EXCLUSIVE MODE`.execute(db);
        await sql`INSERT INTO job_totals (shard, job_type, event, n)
          SELECT 0, job_type, 'submitted', count(*) FROM jobs GROUP BY job_type`.execute(db);
        await sql`INSERT INTO job_totals (shard, job_type, event, n)
          SELECT 0, job_type, status, count(*) FROM jobs WHERE status IN ('completed', 'failed', 'cancelled')
          GROUP BY job_type, status`.execute(db);

        // Terminal states never change again, so the jobs that leave the active states in a
        // statement are exactly the ones that finished in it. A ring slot holds one minute: a
        // newer minute replaces it, an older one (a clock behind by an hour) is ignored.
        const ring = (minute: string) =>
          `n = CASE WHEN ${minute} = excluded.minute THEN m.n + excluded.n WHEN ${minute} < excluded.minute THEN excluded.n ELSE m.n END`;
        if (dialect === 'sqlite') {
          await sql
            .raw(
              `CREATE TRIGGER jobs_total_insert AFTER INSERT ON jobs
               BEGIN INSERT INTO job_totals (shard, job_type, event, n) VALUES (0, NEW.job_type, 'submitted', 1)
                 ON CONFLICT (shard, job_type, event) DO UPDATE SET n = n + 1; END`,
            )
            .execute(db);
          await sql
            .raw(
              `CREATE TRIGGER jobs_total_finish AFTER UPDATE OF status ON jobs
               WHEN OLD.status IN ('queued', 'processing') AND NEW.status IN ('completed', 'failed', 'cancelled')
               BEGIN
                 INSERT INTO job_totals (shard, job_type, event, n) VALUES (0, NEW.job_type, NEW.status, 1)
                   ON CONFLICT (shard, job_type, event) DO UPDATE SET n = n + 1;
                 INSERT INTO job_finish_minutes AS m (shard, slot, minute, n)
                   SELECT 0, (NEW.finished_at / 60000) % 60, NEW.finished_at / 60000, 1 WHERE NEW.finished_at IS NOT NULL
                   ON CONFLICT (shard, slot) DO UPDATE SET ${ring('m.minute')}, minute = max(m.minute, excluded.minute);
               END`,
            )
            .execute(db);
          return;
        }
        const shardRow = `UPDATE queue_counts SET queued = queued + dq, processing = processing + dp WHERE shard = s;`;
        await sql
          .raw(
            `CREATE OR REPLACE FUNCTION media_jobs_count_insert() RETURNS trigger LANGUAGE plpgsql AS $$
             DECLARE dq bigint; dp bigint; s int := pg_backend_pid() % 16;
             BEGIN
               SELECT count(*) FILTER (WHERE status = 'queued'), count(*) FILTER (WHERE status = 'processing')
                 INTO dq, dp FROM new_rows;
               IF dq <> 0 OR dp <> 0 THEN ${shardRow} END IF;
               INSERT INTO job_totals AS t (shard, job_type, event, n)
                 SELECT s, job_type, 'submitted', count(*) FROM new_rows GROUP BY job_type
                 ON CONFLICT (shard, job_type, event) DO UPDATE SET n = t.n + excluded.n;
               RETURN NULL;
             END $$`,
          )
          .execute(db);
        await sql
          .raw(
            `CREATE OR REPLACE FUNCTION media_jobs_count_update() RETURNS trigger LANGUAGE plpgsql AS $$
             DECLARE dq bigint; dp bigint; s int := pg_backend_pid() % 16;
             BEGIN
               SELECT coalesce(sum((n.status = 'queued')::int - (o.status = 'queued')::int), 0),
                      coalesce(sum((n.status = 'processing')::int - (o.status = 'processing')::int), 0)
                 INTO dq, dp FROM new_rows n JOIN old_rows o ON o.uuid = n.uuid WHERE o.status <> n.status;
               IF dq <> 0 OR dp <> 0 THEN ${shardRow} END IF;
               IF dq + dp < 0 THEN
                 WITH done AS (
                   SELECT n.job_type, n.status, n.finished_at FROM new_rows n JOIN old_rows o ON o.uuid = n.uuid
                   WHERE o.status IN ('queued', 'processing') AND n.status IN ('completed', 'failed', 'cancelled')
                 ), totals AS (
                   INSERT INTO job_totals AS t (shard, job_type, event, n)
                   SELECT s, job_type, status, count(*) FROM done GROUP BY job_type, status
                   ON CONFLICT (shard, job_type, event) DO UPDATE SET n = t.n + excluded.n
                 )
                 INSERT INTO job_finish_minutes AS m (shard, slot, minute, n)
                 SELECT s, ((finished_at / 60000) % 60)::int, max(finished_at / 60000), count(*)
                 FROM done WHERE finished_at IS NOT NULL GROUP BY 2
                 ON CONFLICT (shard, slot) DO UPDATE SET ${ring('m.minute')}, minute = greatest(m.minute, excluded.minute);
               END IF;
               RETURN NULL;
             END $$`,
          )
          .execute(db);
      },
    },
    '011_webhook_endpoints': {
      // Owner endpoints (every job's events without a webhook per submit) and their deliveries,
      // which are webhook_events rows with an endpoint_id. Each endpoint query reads a partial
      // index that holds only endpoint rows in the state it serves: never the per-job history.
      async up(db: Kysely<unknown>) {
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
      },
    },
  };
}

export function createMigrator(db: Kysely<unknown>, dialect: Dialect): Migrator {
  const provider: MigrationProvider = { getMigrations: () => Promise.resolve(migrations(dialect)) };
  return new Migrator({
    db,
    provider,
    migrationTableName: 'schema_migrations',
    migrationLockTableName: 'schema_migrations_lock',
  });
}

/** Applies pending migrations; throws with the failing migration's error. */
export async function migrateToLatest(db: Kysely<unknown>, dialect: Dialect): Promise<string[]> {
  if (dialect === 'sqlite') return migrateSqliteExclusively(db);
  return runMigrations(db, dialect);
}

/**
 * Kysely takes no migration lock on SQLite (one connection per process), so two processes started
 * together on a new file would both apply a migration ("duplicate column"). The whole run holds
 * the file's write lock instead (BEGIN IMMEDIATE: the other process waits on busy_timeout, then
 * finds every migration applied); SQLite's DDL is transactional, so a failure leaves nothing half done.
 */
async function migrateSqliteExclusively(db: Kysely<unknown>): Promise<string[]> {
  await sql`BEGIN IMMEDIATE`.execute(db);
  try {
    const applied = await runMigrations(db, 'sqlite');
    await sql`COMMIT`.execute(db);
    return applied;
  } catch (err) {
    await sql`ROLLBACK`.execute(db).catch(() => {});
    throw err;
  }
}

async function runMigrations(db: Kysely<unknown>, dialect: Dialect): Promise<string[]> {
  const { error, results } = await createMigrator(db, dialect).migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error('migration failed', { cause: error });
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/** True when every known migration has been applied (used by readiness checks). */
export async function isUpToDate(db: Kysely<unknown>, dialect: Dialect): Promise<boolean> {
  const list = await createMigrator(db, dialect).getMigrations();
  return list.every((m) => m.executedAt !== undefined);
}
