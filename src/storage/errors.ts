/**
 * The one classification of result-storage failures: an outage (the storage is unreachable or
 * answers 5xx/throttling; wait and retry, the job keeps its place) and a full disk (fail the job
 * with a clear message; nobody knows when space comes back). Everything else is a bug or a
 * misconfiguration and stays an error.
 */

import { CONNECTION_ERROR_CODES } from '../connection-errors.js';

// AWS SDK error names for a request that never got an answer, or a throttled one.
const SDK_TRANSIENT = new Set([
  'TimeoutError',
  'RequestTimeout',
  'RequestTimeoutException',
  'SlowDown',
  'ServiceUnavailable',
  'InternalError',
  'ThrottlingException',
]);
const FULL = new Set(['ENOSPC', 'EDQUOT']);

interface ErrorLike {
  code?: unknown;
  name?: unknown;
  cause?: unknown;
  $metadata?: { httpStatusCode?: unknown };
}

function* chain(err: unknown): Generator<ErrorLike> {
  for (let e: unknown = err, depth = 0; e && typeof e === 'object' && depth < 5; depth++) {
    const like: ErrorLike = e;
    yield like;
    e = like.cause;
  }
}

/** The storage is unreachable or overloaded right now: a retry may succeed. */
export function isStorageUnavailable(err: unknown): boolean {
  for (const e of chain(err)) {
    if (typeof e.code === 'string' && CONNECTION_ERROR_CODES.has(e.code)) return true;
    if (typeof e.name === 'string' && SDK_TRANSIENT.has(e.name)) return true;
    const status = e.$metadata?.httpStatusCode;
    if (typeof status === 'number' && (status >= 500 || status === 429)) return true;
  }
  return false;
}

/** The results disk (or the quota) is full. */
export function isStorageFull(err: unknown): boolean {
  for (const e of chain(err)) if (typeof e.code === 'string' && FULL.has(e.code)) return true;
  return false;
}

/** A few words for /readyz and the log: what is wrong with the storage (no paths, no secrets). */
export function describeStorageError(err: unknown): string {
  if (isStorageFull(err)) return 'result storage is full (no space left on the results disk)';
  for (const e of chain(err)) {
    if (typeof e.code === 'string' && CONNECTION_ERROR_CODES.has(e.code))
      return `result storage unavailable: ${e.code}`;
    const status = e.$metadata?.httpStatusCode;
    if (typeof status === 'number') return `result storage unavailable: HTTP ${status}`;
    if (typeof e.name === 'string' && SDK_TRANSIENT.has(e.name)) return `result storage unavailable: ${e.name}`;
  }
  return 'result storage unavailable';
}
