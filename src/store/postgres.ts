import pg from 'pg';
import { Kysely, PostgresDialect } from 'kysely';
import type { Store } from './db.js';
import type { Database } from './schema.js';

// Times are BIGINT milliseconds: well inside 2^53, so read int8 as a JS number (per pool,
// not by changing pg's global parsers).
const types = {
  getTypeParser: ((oid: number, format?: string) =>
    oid === pg.types.builtins.INT8 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

export async function openPostgres(url: string, poolSize: number): Promise<Store> {
  const pool = new pg.Pool({ connectionString: url, max: poolSize, types });
  // A dropped idle connection must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return { db, dialect: 'postgres', close: () => db.destroy(), url };
}
