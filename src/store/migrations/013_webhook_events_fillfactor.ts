import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../store.js';

/**
 * PostgreSQL: webhook_events' pages filled to half on insert, so that a claim's lease (columns no
 * index holds) is written beside the row, a HOT update, instead of in a new version on another
 * page with an entry in each of the four indexes the pending row is in (primary key, job, and the
 * two pending ones). A claim takes a page's rows together, in one transaction, so each of them
 * needs room for its new version: half the page. The event's move out of pending then prunes the
 * claimed-over versions; the table ends no larger (each event is written three times either way).
 * Only pages filled from now on are affected (no rewrite). SQLite has no such setting.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect === 'postgres') await sql`ALTER TABLE webhook_events SET (fillfactor = 50)`.execute(db);
}
