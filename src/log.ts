import pino, { type Logger } from 'pino';

/** Structured JSON logs on stdout; `request_id` and `job_uuid` ride on child loggers. */
export function createLogger(level: string): Logger {
  return pino({ level, base: { service: 'media-jobs' }, timestamp: pino.stdTimeFunctions.isoTime });
}
