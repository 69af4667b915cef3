import fs from 'node:fs';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import type { Database } from './schema.js';
import { migrateToLatest } from './migrations.js';

export type Dialect = 'sqlite' | 'postgres';

export interface Store {
  db: Kysely<Database>;
  dialect: Dialect;
  /** The connection URL (PostgreSQL), for the LISTEN connection. */
  url?: string;
  close(): Promise<void>;
}

/**
 * Opens the store named by `databaseUrl` (`sqlite:<file>` or `postgres://…`).
 * Everything above this file talks to Kysely only; dialect differences stay in store/.
 */
export async function openStore(databaseUrl: string, opts: { migrate?: boolean; poolSize?: number } = {}): Promise<Store> {
  let store: Store;
  if (databaseUrl.startsWith('sqlite:')) {
    store = openSqlite(databaseUrl.slice('sqlite:'.length));
  } else if (/^postgres(ql)?:\/\//.test(databaseUrl)) {
    const { openPostgres } = await import('./postgres.js');
    store = await openPostgres(databaseUrl, opts.poolSize ?? 10);
  } else {
    throw new Error(`DATABASE_URL must start with sqlite: or postgres:// (got "${databaseUrl.split(':')[0]}:…")`);
  }
  if (opts.migrate !== false) {
    try {
      await migrateToLatest(store.db as Kysely<unknown>, store.dialect);
    } catch (err) {
      await store.close();
      throw err;
    }
  }
  return store;
}

function openSqlite(file: string): Store {
  if (file !== ':memory:') fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const database = new SQLite(file);
  // WAL lets readers run beside the writer; NORMAL sync is durable across process crashes
  // (a power loss may drop the last transactions, never corrupt the file).
  database.pragma('journal_mode = WAL');
  database.pragma('synchronous = NORMAL');
  database.pragma('busy_timeout = 5000');
  database.pragma('foreign_keys = ON');
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database }) });
  return { db, dialect: 'sqlite', close: () => db.destroy() };
}
