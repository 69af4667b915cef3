/**
 * The PostgreSQL server the tests use, and whether it answers. Its own module (only `pg`), so
 * vitest.config.ts can ask it too without loading the service helpers.
 */
import pg from 'pg';

export const ADMIN_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** Whether the PostgreSQL server at ADMIN_URL answers. */
export async function postgresReachable(): Promise<boolean> {
  const c = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 3000 });
  try {
    await c.connect();
    await c.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await c.end().catch(() => undefined);
  }
}
