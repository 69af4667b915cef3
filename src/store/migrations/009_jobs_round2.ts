import { sql, type Kysely } from 'kysely';

/**
 * Deadlines, retention and deletion, structured progress and priority. Each
 * background step finds its rows by a partial index that holds only the rows it serves.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
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
}
