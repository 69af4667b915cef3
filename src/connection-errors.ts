/**
 * Socket error codes that mean "the other side cannot be reached right now" (refused, reset,
 * timed out, no route, no name): the one list that the database and the result storage both read
 * as an outage (wait and retry) rather than a bug. A leaf module: it imports nothing.
 */
export const CONNECTION_ERROR_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ECONNABORTED',
  'EADDRNOTAVAIL',
]);
