import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, Level, Logger } from 'pino';

/** The request id's field in every line about a request. */
export const REQUEST_ID_LOG_LABEL = 'request_id';

/**
 * A request's logger (Fastify's childLoggerFactory) that becomes a real child of the process's
 * logger, with the request's bindings (request_id), only when a line is actually written: most
 * requests log nothing at the configured level, and a pino child costs more to make than the rest
 * of their logging. The lines and their fields are exactly the child's. One object per request,
 * its methods on the prototype.
 */
class LazyRequestLogger {
  private made: Logger | undefined;

  constructor(
    private readonly parent: Logger,
    private readonly bindings: Bindings,
    private readonly opts: ChildLoggerOptions,
  ) {}

  get level(): string {
    return this.made?.level ?? this.parent.level;
  }

  set level(level: string) {
    this.real().level = level;
  }

  fatal(...args: unknown[]): void {
    this.write('fatal', args);
  }
  error(...args: unknown[]): void {
    this.write('error', args);
  }
  warn(...args: unknown[]): void {
    this.write('warn', args);
  }
  info(...args: unknown[]): void {
    this.write('info', args);
  }
  debug(...args: unknown[]): void {
    this.write('debug', args);
  }
  trace(...args: unknown[]): void {
    this.write('trace', args);
  }
  silent(): void {
    /* nothing, as pino's */
  }

  child(bindings: Bindings, opts?: ChildLoggerOptions): Logger {
    return this.real().child(bindings, opts);
  }

  private write(level: Level, args: unknown[]): void {
    const logger = this.made ?? this.parent;
    if (!logger.isLevelEnabled(level)) return;
    const real = this.real();
    Reflect.apply(real[level], real, args);
  }

  private real(): Logger {
    return (this.made ??= this.parent.child(this.bindings, this.opts));
  }
}

export function lazyChildLogger(parent: Logger, bindings: Bindings, opts: ChildLoggerOptions): FastifyBaseLogger {
  return new LazyRequestLogger(parent, bindings, opts);
}
