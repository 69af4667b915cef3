/** The `error_type` values a failed job can carry (DESIGN.md §2). */
export const ERROR_TYPES = [
  'media_fetch_failed',
  'invalid_media',
  'processing_error',
  'timeout',
  'internal_error',
] as const;
export type ErrorType = (typeof ERROR_TYPES)[number];

/**
 * A failure that ends a job with a known `error_type` and a message meant for the client.
 * Anything else thrown by a processor becomes `internal_error` with a generic message.
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
