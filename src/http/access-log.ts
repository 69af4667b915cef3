import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { Logger } from 'pino';
import type { Metrics } from '../metrics.js';
import type { Series } from '../series-histogram.js';
import { REQUEST_ID_LOG_LABEL } from './request-logger.js';

/** Routes that get no access log line (probes and scrapes): they still count in the latency histogram. */
const QUIET_ROUTES = new Set(['/metrics', '/healthz', '/readyz']);

/**
 * The onResponse hook: the latency histogram by route pattern (never by raw URL: bounded label
 * values), and one structured access log line per request at `info` (request_id, as the request's
 * logger would bind it; job_uuid when the route has one). `sample` (ACCESS_LOG_SAMPLE) is the share of
 * successful requests that get a line; 4xx and 5xx answers always get one. A callback hook, its
 * histogram series looked up by route, method and status (no label hashing per request).
 */
export function accessLogHook(metrics: Metrics, log: Logger, sample: number) {
  const byRoute = new Map<string, Map<string, Map<number, Series>>>();
  const series = (method: string, route: string, status: number) => {
    let byMethod = byRoute.get(route);
    if (!byMethod) byRoute.set(route, (byMethod = new Map<string, Map<number, Series>>()));
    let byStatus = byMethod.get(method);
    if (!byStatus) byMethod.set(method, (byStatus = new Map<number, Series>()));
    let s = byStatus.get(status);
    if (!s) byStatus.set(status, (s = metrics.httpSeconds.series({ method, route, status_code: status })));
    return s;
  };
  return (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    const route = request.routeOptions.url ?? 'unmatched';
    const status = reply.statusCode;
    const ms = reply.elapsedTime;
    series(request.method, route, status).observe(ms / 1000);
    if (QUIET_ROUTES.has(route) || !log.isLevelEnabled('info') || (status < 400 && !sampled(sample))) {
      done();
      return;
    }
    const params = request.params as { uuid?: unknown } | undefined;
    const uuid = params && typeof params === 'object' ? params.uuid : undefined;
    // The process's logger with the request id first: the line a request child logger would write
    // (its binding goes first), without making that child (a pino child costs more than the line).
    const fields = {
      [REQUEST_ID_LOG_LABEL]: request.id,
      method: request.method,
      route,
      status,
      ms: Math.round(ms * 10) / 10,
      ...(uuid ? { job_uuid: uuid } : {}),
    };
    log.info(fields, 'request');
    done();
  };
}

const sampled = (share: number) => share >= 1 || (share > 0 && Math.random() < share);
