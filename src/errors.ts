/**
 * Errors of the domain (jobs, webhooks, workers), free of HTTP: each names what went wrong, and
 * the HTTP layer alone decides the status code (http/api-error.ts maps kinds to codes).
 */
import type { ErrorType } from './contract/api.js';

export type ErrorKind =
  | 'invalid' // the request is wrong: 400
  | 'not_found' // no such thing for this caller: 404
  | 'conflict' // the thing is in a state that forbids this: 409
  | 'gone' // it existed and was deleted: 410
  | 'unavailable'; // a dependency (the database) is down: 503, retry later

export class DomainError extends Error {
  constructor(
    readonly kind: ErrorKind,
    message: string,
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

export const invalid = (message: string) => new DomainError('invalid', message);
export const notFound = (message: string) => new DomainError('not_found', message);
export const conflict = (message: string) => new DomainError('conflict', message);
export const gone = (message: string) => new DomainError('gone', message);

/**
 * A failure that ends a job with a known `error_type` and a message meant for the client (media
 * that cannot be fetched or decoded, a processor's known failure). Anything else thrown while a
 * job runs becomes `internal_error` with a generic message.
 */
export class JobError extends Error {
  constructor(
    readonly errorType: ErrorType,
    message: string,
  ) {
    super(message);
    this.name = 'JobError';
  }
}
