import type pg from 'pg';
import { CompiledQuery, type Kysely } from 'kysely';
import type { Database } from './schema.js';

/**
 * Named statements on PostgreSQL, for the webhook dispatcher's claims and recordings (they run for
 * every delivery): the server parses and plans a named statement once per connection, where
 * Kysely's unnamed ones are parsed and planned at every run; and rows come back as arrays, which pg
 * builds for less than objects. This module holds no pg import of its own (SQLite deployments do
 * not load pg): store/postgres.ts registers each store's pool here.
 */

const pools = new WeakMap<Kysely<Database>, pg.Pool>();

/** Called by store/postgres.ts for each store it opens. */
export function registerPgPool(db: Kysely<Database>, pool: pg.Pool): void {
  pools.set(db, pool);
}

/** A statement's text and the name it is prepared under (a new text needs a new name). */
export interface NamedStatement {
  name: string;
  text: string;
}

/**
 * Runs `st` with `values` and returns its rows as arrays (columns in the statement's order). On a
 * store's own Kysely instance it runs as a named statement on a pooled connection; on any other
 * (a transaction's) through Kysely, so it joins that transaction.
 */
export async function runPg<R extends unknown[]>(
  db: Kysely<Database>,
  st: NamedStatement,
  values: unknown[],
): Promise<R[]> {
  const pool = pools.get(db);
  if (pool) return (await pool.query<R>({ name: st.name, text: st.text, values, rowMode: 'array' })).rows;
  const { rows } = await db.executeQuery<Record<string, unknown>>(CompiledQuery.raw(st.text, values));
  return rows.map((r) => Object.values(r) as R);
}
