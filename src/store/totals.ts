import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/** One row of the cluster's job totals: `event` is `submitted` or a terminal status. */
export interface JobTotal {
  job_type: string;
  event: string;
  n: number;
}

/**
 * The whole cluster's submitted and finished totals per job type (migration 010's trigger-kept
 * counters). Reads the small job_totals table (shards × job types × 4 events), never `jobs`: the
 * cost of a scrape does not grow with the number of jobs.
 */
export async function readJobTotals(db: Kysely<Database>): Promise<JobTotal[]> {
  const rows = await db
    .selectFrom('job_totals')
    .select((eb) => ['job_type', 'event', eb.fn.sum<number | string>('n').as('n')])
    .groupBy(['job_type', 'event'])
    .execute();
  return rows.map((r) => ({ job_type: r.job_type, event: r.event, n: Number(r.n) }));
}

/**
 * Finished jobs per minute across the cluster, for minutes `from`..`to` (Unix minutes), from the
 * per-minute ring (at most 60 slots per shard; slots holding an older minute are stale).
 */
export async function finishedPerMinute(db: Kysely<Database>, from: number, to: number): Promise<Map<number, number>> {
  const rows = await db
    .selectFrom('job_finish_minutes')
    .select((eb) => ['minute', eb.fn.sum<number | string>('n').as('n')])
    .where('minute', '>=', from)
    .where('minute', '<=', to)
    .groupBy('minute')
    .execute();
  return new Map(rows.map((r) => [r.minute, Number(r.n)]));
}
