import fs from 'node:fs';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, SqliteDialect, type Driver } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from './schema.js';
import { migrateToLatest } from './migrations.js';
import type { Store } from './store.js';

export interface OpenOptions {
  migrate?: boolean;
  poolSize?: number;
  /** PostgreSQL: see store/postgres.ts. */
  connectTimeoutMs?: number;
  queryTimeoutMs?: number;
  log?: Logger;
}

/**
 * Opens the store named by `databaseUrl` (`sqlite:<file>` or `postgres://…`).
 * Everything above this file talks to Kysely only; dialect differences stay in store/.
 */
export async function openStore(databaseUrl: string, opts: OpenOptions = {}): Promise<Store> {
  let store: Store;
  if (databaseUrl.startsWith('sqlite:')) {
    store = openSqlite(databaseUrl.slice('sqlite:'.length));
  } else if (/^postgres(ql)?:\/\//.test(databaseUrl)) {
    const { openPostgres } = await import('./postgres.js');
    store = openPostgres(databaseUrl, {
      poolSize: opts.poolSize ?? 10,
      connectTimeoutMs: opts.connectTimeoutMs,
      log: opts.log,
    });
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
  if (opts.queryTimeoutMs) store.boundQueries?.(opts.queryTimeoutMs);
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
  // 64 MiB of page cache (the default is 2 MiB): a job write touches the table and several
  // indexes, and at a large backlog their upper levels should stay in memory.
  database.pragma('cache_size = -65536');
  const db = new Kysely<Database>({ dialect: new RollbackSafeSqliteDialect(database) });
  return { db, dialect: 'sqlite', close: () => db.destroy() };
}

/**
 * Kysely prepares every statement it runs; preparing costs more than running a point query on
 * SQLite. Prepared statements are reusable (Kysely never iterates two at once on one connection),
 * so keep the most recent ones by SQL text.
 */
function withStatementCache(database: SQLite.Database, max = 500) {
  const cache = new Map<string, SQLite.Statement>();
  return {
    close: () => database.close(),
    prepare(source: string) {
      let stmt = cache.get(source);
      if (stmt) {
        // Refresh its place in the LRU order.
        cache.delete(source);
      } else {
        stmt = database.prepare(source);
        if (cache.size >= max) cache.delete(cache.keys().next().value!);
      }
      cache.set(source, stmt);
      return stmt;
    },
  };
}

/**
 * On SQLITE_FULL, SQLITE_BUSY or SQLITE_IOERR, SQLite may already have rolled the transaction back;
 * Kysely's ROLLBACK would then fail with "no transaction is active" and hide the real error (a 500
 * instead of the 503 that a full disk deserves).
 */
class RollbackSafeSqliteDialect extends SqliteDialect {
  constructor(private readonly database: SQLite.Database) {
    super({ database: withStatementCache(database) });
  }

  override createDriver(): Driver {
    const driver = super.createDriver();
    const rollback = driver.rollbackTransaction.bind(driver);
    driver.rollbackTransaction = async (connection) => {
      if (this.database.inTransaction) await rollback(connection);
    };
    return driver;
  }
}
