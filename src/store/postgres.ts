import pg from 'pg';
import { Kysely, PostgresDialect } from 'kysely';
import type { Logger } from 'pino';
import type { Store } from './store.js';
import { isDatabaseUnavailable } from './errors.js';
import { OutageLog } from '../runtime/outage.js';
import type { Database } from './schema.js';
import { registerPgPool } from './pg-statements.js';

// Times are BIGINT milliseconds: well inside 2^53, so read int8 as a JS number (per pool,
// not by changing pg's global parsers).
type Oid = Parameters<typeof pg.types.getTypeParser>[0];
const types = {
  getTypeParser: ((oid: Oid, format?: 'text') =>
    oid === pg.types.builtins.INT8
      ? (v: string) => Number(v)
      : (pg.types.getTypeParser(oid, format) as (v: string) => unknown)) as typeof pg.types.getTypeParser,
};

export interface PostgresOptions {
  poolSize: number;
  /** Bound on opening a connection and on waiting for a free one (then the caller gets a 503). */
  connectTimeoutMs?: number;
  /** Logs each outage once (start and end); silent without. */
  log?: Logger;
}

/** Idle connections probe the server after this long, so a vanished peer is noticed. */
const KEEPALIVE_DELAY_MS = 10_000;

/**
 * A pg Client that (1) always has an 'error' listener, (2) reports connection and query outcomes
 * to the outage log and (3) can bound each query: pg-pool removes its own listener while a client
 * is checked out (node_modules/pg-pool `_acquireClient`), so without (1) a server restart during
 * a transaction is an unhandled 'error' event that kills the process.
 */
function guardedClient(outage: OutageLog, bound: { queryTimeoutMs: number }) {
  return class GuardedClient extends pg.Client {
    constructor(config?: pg.ClientConfig) {
      super(config);
      // Permanent: the failed query itself rejects (and answers 503); this only keeps the
      // process alive. The pool drops the client on release because it is no longer queryable.
      this.on('error', (err) => outage.failed(err));
    }

    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- pg's connect and query are overloaded (callback and promise forms): a subclass can restate them only with any
    override connect(...args: any[]): any {
      const done = (err?: Error | null) => {
        // Only an outage is logged as one: a missing database or a refused login is the caller's error.
        if (!err) outage.succeeded();
        else if (isDatabaseUnavailable(err)) outage.failed(err);
      };
      const callback = args[0] as ((err: Error | null, c?: unknown) => void) | undefined;
      if (callback) {
        super.connect(((err: Error | null) => {
          done(err);
          callback(err, this);
        }) as (err: Error) => void);
        return;
      }
      return super.connect().then(
        (c) => {
          done();
          return c;
        },
        (err: unknown) => {
          done(err as Error);
          throw err;
        },
      );
    }

    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the overloads again (see connect)
    override query(...args: any[]): any {
      const result = (super.query as (...a: unknown[]) => unknown)(...(args as unknown[])) as
        Promise<unknown> | undefined;
      if (!(result instanceof Promise)) return result;
      // A blackholed connection (no RST, no FIN) would otherwise wait for TCP's retransmission
      // limit (~15 min): drop the connection, which rejects the query as "unavailable".
      const ms = bound.queryTimeoutMs;
      const timer =
        ms > 0
          ? setTimeout(() => {
              const err = Object.assign(new Error(`database did not answer within ${ms} ms; connection dropped`), {
                code: 'ETIMEDOUT',
              });
              (this as unknown as { connection: { stream: { destroy(e: Error): void } } }).connection.stream.destroy(
                err,
              );
            }, ms)
          : undefined;
      return result.then(
        (r) => {
          clearTimeout(timer);
          outage.succeeded();
          return r;
        },
        (err: unknown) => {
          clearTimeout(timer);
          if (isDatabaseUnavailable(err)) outage.failed(err);
          throw err;
        },
      );
    }
  };
}

export function openPostgres(url: string, opts: PostgresOptions): Store {
  const outage = new OutageLog(opts.log, 'database');
  const bound = { queryTimeoutMs: 0 };
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.poolSize,
    types,
    connectionTimeoutMillis: opts.connectTimeoutMs ?? 5_000,
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_DELAY_MS,
    Client: guardedClient(outage, bound),
  });
  // An idle client's error: pg-pool has already dropped it and replaces it on demand.
  pool.on('error', (err) => outage.failed(err));
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  registerPgPool(db, pool);
  return {
    db,
    dialect: 'postgres',
    close: () => db.destroy(),
    url,
    // Armed after migrations: a long index build at start-up is not an outage.
    boundQueries: (ms) => {
      bound.queryTimeoutMs = ms;
    },
  };
}
