import type { Dependency } from '../runtime/outage.js';
/**
 * Errors that mean "the database is not available right now" (down, restarting, unreachable, out
 * of disk, locked): the request may succeed later, so the API answers 503 and background loops
 * back off, instead of a 500 or a crash. Everything else is a bug or bad data and stays an error.
 */

import { CONNECTION_ERROR_CODES } from '../connection-errors.js';

// PostgreSQL SQLSTATE classes and codes: 08 connection exception, 57P0x shutdown/crash/cannot
// connect now, 53 insufficient resources (disk full, out of memory, too many connections),
// 40001/40P01 serialization failure/deadlock (a retry will do).
const PG_TRANSIENT = /^(08...|57P0[1-4]|53...|40001|40P01|55P03|57014)$/;
// SQLite: busy or locked past busy_timeout, disk full, I/O error, read-only (e.g. remounted).
const SQLITE = /^SQLITE_(BUSY|LOCKED|FULL|IOERR|READONLY|CANTOPEN|PROTOCOL)/;
// pg and pg-pool report these as plain Errors without a code.
const PG_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection terminated unexpectedly|terminating connection|the database system is (starting up|shutting down|in recovery mode)|Client was closed and is not queryable|Cannot use a pool after calling end/i;

export function isDatabaseUnavailable(err: unknown): boolean {
  for (
    let e: unknown = err, depth = 0;
    e && typeof e === 'object' && depth < 5;
    e = (e as { cause?: unknown }).cause, depth++
  ) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && (PG_TRANSIENT.test(code) || CONNECTION_ERROR_CODES.has(code) || SQLITE.test(code)))
      return true;
    const message = (e as { message?: unknown }).message;
    if (typeof message === 'string' && PG_MESSAGES.test(message)) return true;
  }
  return false;
}

/**
 * A transaction that lost to a concurrent one (deadlock, serialization failure): the same work
 * succeeds when retried, alone. Also counted as unavailable above, for single statements.
 */
export function isTransactionConflict(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '40P01' || code === '40001';
}

/** The database as a dependency that loops and batch writers wait out (runtime/outage.ts). */
export const DATABASE: Dependency = { what: 'database', isOutage: isDatabaseUnavailable };
