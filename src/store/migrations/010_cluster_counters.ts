import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../store.js';

/**
 * The cluster's submitted and finished totals, and finished jobs per minute, kept by the
 * triggers that keep queue depth (003_queue_engine's pattern), so /metrics and the operator
 * view of any process read the whole cluster in a few rows. On PostgreSQL the existing
 * statement-level functions are extended (one trigger call per statement, as before), and
 * every row they touch is in the writer backend's shard, taken after its queue_counts row:
 * no new hot row, no new lock order.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await tables(db);
  await countSoFar(db, dialect);
  if (dialect === 'sqlite') await sqliteTriggers(db);
  else await postgresFunctions(db);
}

async function tables(db: Kysely<unknown>): Promise<void> {
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
}

/**
 * Writers wait while the totals are counted (one scan of jobs, once), so none is missed or
 * counted twice. The per-minute ring starts empty.
 */
async function countSoFar(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect === 'postgres') await sql`LOCK TABLE jobs IN SHARE ROW EXCLUSIVE MODE`.execute(db);
  await sql`INSERT INTO job_totals (shard, job_type, event, n)
    SELECT 0, job_type, 'submitted', count(*) FROM jobs GROUP BY job_type`.execute(db);
  await sql`INSERT INTO job_totals (shard, job_type, event, n)
    SELECT 0, job_type, status, count(*) FROM jobs WHERE status IN ('completed', 'failed', 'cancelled')
    GROUP BY job_type, status`.execute(db);
}

/**
 * Terminal states never change again, so the jobs that leave the active states in a
 * statement are exactly the ones that finished in it. A ring slot holds one minute: a
 * newer minute replaces it, an older one (a clock behind by an hour) is ignored.
 */
const ring = (minute: string) =>
  `n = CASE WHEN ${minute} = excluded.minute THEN m.n + excluded.n WHEN ${minute} < excluded.minute THEN excluded.n ELSE m.n END`;

async function sqliteTriggers(db: Kysely<unknown>): Promise<void> {
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
}

/** The queue-depth functions of 003, extended; their triggers stay as they are. */
async function postgresFunctions(db: Kysely<unknown>): Promise<void> {
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
}
