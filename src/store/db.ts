import fs from 'node:fs';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, SqliteDialect, type Driver } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from './schema.js';
import { migrateToLatest } from './migrate.js';
import { CONNECTION_ERROR_CODES } from '../connection-errors.js';
import { DatabaseOpenError } from './errors.js';
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
 * better-sqlite3 12 (the last line that builds on Node 20) aborts the process on Node 24 when V8
 * collects a statement (its ObjectWrap removes a cleanup hook with no current environment; fixed in
 * better-sqlite3 13, which needs Node 22). So on Node 24 the embedded store is refused in one line
 * rather than left to crash at random.
 */
function refuseSqliteOnUnsafeNode(): void {
  const major = Number(process.versions.node.split('.')[0]);
  if (major >= 24)
    throw new DatabaseOpenError(
      `the embedded SQLite store does not run on Node ${process.versions.node} (better-sqlite3 12 aborts on Node 24): use Node 20 or 22, or set DATABASE_URL to a PostgreSQL database`,
    );
}

/**
 * Opens the store named by `databaseUrl` (`sqlite:<file>` or `postgres://…`).
 * Everything above this file talks to Kysely only; dialect differences stay in store/.
 */
export async function openStore(databaseUrl: string, opts: OpenOptions = {}): Promise<Store> {
  let store: Store;
  if (databaseUrl.startsWith('sqlite:')) {
    refuseSqliteOnUnsafeNode();
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
      const reason = openFailure(databaseUrl, err);
      throw reason === undefined ? err : new DatabaseOpenError(reason);
    }
  }
  if (opts.queryTimeoutMs) store.boundQueries?.(opts.queryTimeoutMs);
  return store;
}

/**
 * What an operator must do when the database cannot be opened at all, in one line (the CLI prints
 * a DatabaseOpenError without a stack trace); undefined for anything else.
 */
export function openFailure(databaseUrl: string, err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !/^postgres(ql)?:/.test(databaseUrl)) return undefined;
  let url: URL;
  try {
    url = new URL(databaseUrl);
  } catch {
    return undefined;
  }
  const host = url.hostname || 'localhost';
  const port = url.port || '5432';
  const user = decodeURIComponent(url.username);
  const name = decodeURIComponent(url.pathname.slice(1));
  const where = `PostgreSQL at ${host}:${port}`;
  if (code === '3D000')
    return `database "${name}" does not exist on ${where}; create it first (createdb -h ${host} -p ${port}${user ? ` -U ${user}` : ''} ${name}), then start again`;
  if (code === '28P01' || code === '28000')
    return `${where} refused the login${user ? ` of user "${user}"` : ''}: check the user and password in DATABASE_URL`;
  if (CONNECTION_ERROR_CODES.has(code))
    return `${where} cannot be reached (${code}): is it running, and is DATABASE_URL's host right?`;
  return undefined;
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
  sqliteHandles.set(db, database);
  return { db, dialect: 'sqlite', close: () => db.destroy() };
}

const sqliteHandles = new WeakMap<Kysely<Database>, SQLite.Database>();

/**
 * The SQLite connection behind a store's Kysely instance (undefined for PostgreSQL and for a
 * transaction's instance), for the few hottest reads that run a prepared statement on it directly
 * (store/jobs.ts). Such a read must not run while a transaction is open on the connection: it
 * would see that transaction's uncommitted rows (check `inTransaction`, else go through Kysely,
 * which waits for the transaction to end).
 */
export function sqliteHandle(db: Kysely<Database>): SQLite.Database | undefined {
  return sqliteHandles.get(db);
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
