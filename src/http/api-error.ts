import type { ErrorKind } from '../errors.js';

/** An error answered to the client as-is: HTTP status plus the envelope's message. */
export class ApiError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** The HTTP status of each domain error kind (the domain itself knows nothing of HTTP). */
export const STATUS_OF_KIND: Record<ErrorKind, number> = {
  invalid: 400,
  not_found: 404,
  conflict: 409,
  gone: 410,
  unavailable: 503,
};
