import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../store.js';

/**
 * PostgreSQL: the dispatcher's claim is a named statement, planned once per connection if its
 * generic plan (made without the parameters' values) costs no more than the plans made for them.
 * Its destinations came from `unnest` of an array parameter, which a generic plan counts as 100
 * rows (for a given array, its length): 100 index scans estimated where one or a few run, so the
 * claim was planned afresh every time. This function yields the same rows and tells the planner
 * to expect one (in plpgsql, which the planner does not inline into the statement, so its estimate
 * holds). The plan is the same in shape either way: per destination, a scan of its pending range.
 * SQLite has no plan cache to steer.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect !== 'postgres') return;
  await sql`CREATE FUNCTION webhook_claim_rooms(destinations text[], rooms int[])
    RETURNS TABLE (destination text, room int) LANGUAGE plpgsql STABLE ROWS 1
    AS 'BEGIN RETURN QUERY SELECT * FROM unnest(destinations, rooms); END'`.execute(db);
}
