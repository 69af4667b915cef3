import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { Logger } from 'pino';
import type { Histogram } from 'prom-client';
import type { Metrics } from '../metrics.js';

/** Routes that get no access log line (probes and scrapes): they still count in the latency histogram. */
const QUIET_ROUTES = new Set(['/metrics', '/healthz', '/readyz']);

/**
 * The onResponse hook: the latency histogram by route pattern (never by raw URL: bounded label
 * values), and one structured access log line per request at `info` (request_id from the request's
 * logger; job_uuid when the route has one). `sample` (ACCESS_LOG_SAMPLE) is the share of
 * successful requests that get a line; 4xx and 5xx answers always get one. A callback hook with the
 * histogram's children cached per label set: the hottest routes pay no promise and no label hashing.
 */
export function accessLogHook(metrics: Metrics, log: Logger, sample: number) {
  const children = new Map<string, Histogram.Internal<string>>();
  const timer = (method: string, route: string, status: number) => {
    const key = `${method} ${status} ${route}`;
    let child = children.get(key);
    if (!child) {
      child = metrics.httpSeconds.labels({ method, route, status_code: status });
      children.set(key, child);
    }
    return child;
  };
  return (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    const route = request.routeOptions.url ?? 'unmatched';
    const status = reply.statusCode;
    timer(request.method, route, status).observe(reply.elapsedTime / 1000);
    if (QUIET_ROUTES.has(route) || !log.isLevelEnabled('info') || (status < 400 && !sampled(sample))) {
      done();
      return;
    }
    const params = request.params as { uuid?: unknown } | undefined;
    const uuid = params && typeof params === 'object' ? params.uuid : undefined;
    request.log.info(
      {
        method: request.method,
        route,
        status,
        ms: Math.round(reply.elapsedTime * 10) / 10,
        ...(uuid ? { job_uuid: uuid } : {}),
      },
      'request',
    );
    done();
  };
}

const sampled = (share: number) => share >= 1 || (share > 0 && Math.random() < share);
