import pino, { type Logger } from 'pino';

/**
 * Structured JSON logs on stdout; `request_id` and `job_uuid` ride on child loggers. Written
 * asynchronously: lines that arrive while a write is in flight go out together in the next one
 * (under load, one write for many access log lines instead of one each); pino flushes what is left
 * when the process exits.
 */
export function createLogger(level: string): Logger {
  return pino(
    { level, base: { service: 'media-jobs' }, timestamp: pino.stdTimeFunctions.isoTime },
    pino.destination({ dest: 1, sync: false }),
  );
}
