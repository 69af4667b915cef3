import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../store.js';

/**
 * PostgreSQL: each event carries how many attempt rows it has (`attempts_logged`), so the
 * dispatcher's recording numbers an attempt from the row it updates anyway, instead of counting
 * the event's earlier attempts (an index probe per attempt). NULL means "not known, count them":
 * the rows that exist now (added without a default, the column costs no rewrite, whatever the
 * table's size), and any event an attempt was recorded for outside the dispatcher's statement
 * (store/webhooks.ts sets it back to NULL there). Rows inserted from now on start at 0. SQLite's
 * recording counts (a probe costs it less than a wider row would), so it has no such column.
 */
export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect !== 'postgres') return;
  await sql`ALTER TABLE webhook_events ADD COLUMN attempts_logged integer`.execute(db);
  await sql`ALTER TABLE webhook_events ALTER COLUMN attempts_logged SET DEFAULT 0`.execute(db);
}
