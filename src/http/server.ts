import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import fastifySwagger from '@fastify/swagger';
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { JobService } from '../jobs/service.js';
import type { Catalogue } from '../processors/catalogue.js';
import type { LocalResultStore } from '../storage/local.js';
import type { StorageHealth } from '../storage/health.js';
import type { Store } from '../store/store.js';
import { DomainError } from '../errors.js';
import { isDatabaseUnavailable } from '../store/errors.js';
import { ApiError, STATUS_OF_KIND } from './api-error.js';
import { authHook } from './auth.js';
import { fail } from './envelope.js';
import { jobTypeRoutes } from './routes/job-types.js';
import { jobRoutes } from './routes/jobs.js';
import { validatorCompiler } from './validation.js';
import { swaggerOptions, type OpenApiDeps } from './openapi.js';
import { docsRoutes } from './routes/docs.js';
import { opsRoutes } from './routes/ops.js';
import { resultRoutes } from './routes/results.js';
import { registerRateLimits, type RateLimitOptions } from './rate-limit.js';
import { KeyCache } from './key-cache.js';
import type { Signals } from '../signals.js';
import { KEY_REVOKED_SIGNAL } from '../store/keys.js';
import type { Metrics } from '../metrics.js';
import { webhookRoutes } from './routes/webhooks.js';
import { webhookEndpointRoutes } from './routes/webhook-endpoints.js';
import { eventRoutes, MAX_STREAMS_PER_OWNER, type EventStreamOptions } from './routes/events.js';
import { jobDetailRoutes } from './routes/job-detail.js';
import { lingerOnClose } from './linger.js';
import { jsonBodyProblem } from './json-body.js';
import { accessLogHook } from './access-log.js';
import { lazyChildLogger, REQUEST_ID_LOG_LABEL } from './request-logger.js';
import { dashboardRoutes } from './routes/dashboard.js';
import { adminRoutes, type LocalWorkerInfo } from './admin/routes.js';
import { Operator } from '../operator.js';
import type { WebhookService } from '../webhooks/service.js';
import type { EndpointService } from '../webhooks/endpoints.js';
import type { RemoteWork } from '../remote/service.js';
import { workerRoutes } from './worker/routes.js';

export interface HttpDeps {
  store: Store;
  service: JobService;
  webhooks: WebhookService;
  endpoints: EndpointService;
  catalogue: Catalogue;
  log: Logger;
  clock: Clock;
  maxBodyBytes: number;
  /** Bounds on slow clients (HTTP_HEADERS_TIMEOUT, HTTP_REQUEST_TIMEOUT, HTTP_MAX_CONNECTIONS). */
  connections: ConnectionLimits;
  /** This process's view of its result storage, for /readyz. */
  storageHealth?: StorageHealth;
  allowPrivate: boolean;
  /** WEBHOOK_RETRY_SCHEDULE and WEBHOOK_TIMEOUT, as the document describes them. */
  webhookRetryScheduleMs: readonly number[];
  webhookTimeoutMs: number;
  metrics: Metrics;
  /** ACCESS_LOG_SAMPLE: the share of successful requests that get an access log line (errors always do). */
  accessLogSample?: number;
  rateLimits: RateLimitOptions;
  /** Revocations made by other processes reach the key cache through it (PostgreSQL NOTIFY). */
  signals?: Signals;
  /** Present when results are served by this process (the local store). */
  localResults?: { store: LocalResultStore; secret: string };
  /** GET /api/v1/jobs/{uuid}/events tuning (tests shorten the poll). */
  eventStreams?: EventStreamOptions;
  /** The worker pools of this process, for the operator view. */
  localWorkers?: () => LocalWorkerInfo[];
  /** The remote worker protocol (/api/v1/worker). */
  remote?: { work: RemoteWork; maxOutputBytes: number };
  /** 'ops': only /healthz, /readyz and /metrics (a worker-only process); default: everything. */
  routes?: 'all' | 'ops';
}

export interface ConnectionLimits {
  /** A request's headers must arrive within this long (slowloris). */
  headersTimeoutMs: number;
  /** The whole request, body included, within this long (slow bodies); responses are not bounded. */
  requestTimeoutMs: number;
  /** Open connections at most (0: no limit); past it new ones are closed at once. */
  maxConnections: number;
}

const REQUEST_ID_RE = /^[A-Za-z0-9._:@/+=-]{1,128}$/;

/** Fastify's own client errors, in the envelope's words. */
function describeFastifyError(err: FastifyError, maxBodyBytes: number): [number, string] {
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return [413, `body is larger than ${maxBodyBytes} bytes`];
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return [415, 'Content-Type must be application/json'];
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return [400, 'Content-Length does not match the body'];
    default:
      return [err.statusCode!, err.message];
  }
}

export function buildServer(deps: HttpDeps): FastifyInstance {
  const app = createFastify(deps);
  parseJsonBodies(app);
  app.setValidatorCompiler(validatorCompiler);
  // Responses are not re-validated on the way out (the hot path); test/openapi checks real ones against the document.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  const docs: OpenApiDeps = {
    catalogue: deps.catalogue,
    allowPrivate: deps.allowPrivate,
    webhookRetryScheduleMs: deps.webhookRetryScheduleMs,
    webhookTimeoutMs: deps.webhookTimeoutMs,
    maxStreamsPerOwner: deps.eventStreams?.maxPerOwner ?? MAX_STREAMS_PER_OWNER,
  };
  const opsOnly = deps.routes === 'ops';
  if (!opsOnly) app.register(fastifySwagger, swaggerOptions(docs));
  addRequestHooks(app, deps);
  answerErrors(app, deps.maxBodyBytes);
  answerUnknownRoutes(app);
  // A worker-only process: health, readiness and metrics on its port, nothing else.
  if (opsOnly) {
    app.register(async (root) => {
      opsRoutes(root, deps.store, deps.metrics);
    });
    return app;
  }
  apiRoutes(app, deps);
  otherRoutes(app, deps, docs);
  return app;
}

/** The Fastify instance: logging, request ids, router, timeouts and connection limits, framework errors as envelopes. */
function createFastify(deps: HttpDeps): FastifyInstance {
  const limits = deps.connections;
  const app = Fastify({
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion -- without it Fastify infers pino's Logger and the instance no longer fits FastifyInstance
    loggerInstance: deps.log as FastifyBaseLogger,
    logController: new Fastify.LogController({ disableRequestLogging: true, requestIdLogLabel: REQUEST_ID_LOG_LABEL }),
    childLoggerFactory: (_logger, bindings, opts) => lazyChildLogger(deps.log, bindings, opts),
    bodyLimit: deps.maxBodyBytes,
    // Echo a sane incoming X-Request-Id, else make one.
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID_RE.test(given) ? given : randomUUID();
    },
    return503OnClosing: true,
    routerOptions: { ignoreTrailingSlash: true },
    // Node checks the two timeouts every connectionsCheckingInterval (30 s by default): check
    // often enough that a slow client is cut close to its bound. An expired request is answered
    // with the 408 envelope below (clientErrorHandler) and closed.
    requestTimeout: limits.requestTimeoutMs,
    http: {
      requireHostHeader: false,
      headersTimeout: limits.headersTimeoutMs,
      connectionsCheckingInterval: Math.max(100, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 4))),
    },
    // Errors the router raises before any hook runs: still the envelope.
    frameworkErrors: (err, request, rawReply) => {
      const reply = rawReply as unknown as FastifyReply;
      reply.header('x-request-id', request.id);
      if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') void reply.code(414).send(fail('a path segment is too long'));
      else void reply.code(400).send(fail('the path is not valid percent-encoding'));
    },
    // Requests the HTTP parser rejects: answer with the envelope, then close.
    clientErrorHandler: answerClientError,
  });
  if (limits.maxConnections > 0) app.server.maxConnections = limits.maxConnections;
  app.server.on('checkExpectation', (_req, res) => {
    res.writeHead(417, { 'content-type': 'application/json; charset=utf-8', 'x-request-id': randomUUID() });
    res.end(JSON.stringify(fail('Expect: only 100-continue is supported')));
  });
  return app;
}

/** Requests the HTTP parser rejects: answer with the envelope, then close. */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'request headers are too large']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'request timed out']
        : [400, 'malformed HTTP request'];
  const body = JSON.stringify(fail(message));
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${randomUUID()}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}

/** JSON only. An empty body parses as undefined (cancel takes none); submit rejects it itself. */
function parseJsonBodies(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(/^application\/([^;]+\+)?json(;|$)/, { parseAs: 'string' }, (req, body, done) => {
    // A compressed body is not decoded here: say so, rather than "not valid JSON" (or, worse, accept it).
    const coding = req.headers['content-encoding'];
    if (coding !== undefined && coding.trim().toLowerCase() !== 'identity') {
      done(new ApiError(415, `Content-Encoding ${coding} is not supported; send the body uncompressed`), undefined);
      return;
    }
    const text = body as string;
    if (text.trim() === '') {
      done(null, undefined);
      return;
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      done(new ApiError(400, 'body is not valid JSON'), undefined);
      return;
    }
    const problem = jsonBodyProblem(value);
    if (problem !== undefined) {
      done(new ApiError(400, problem), undefined);
      return;
    }
    done(null, value);
  });
}

/** Every request: its X-Request-Id on the answer, HTTP/1.1's Host rule, then the access log and latency histogram. */
function addRequestHooks(app: FastifyInstance, deps: HttpDeps): void {
  // Callback hooks (no promise per request) on the hottest path.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    if (request.raw.httpVersionMajor === 1 && request.raw.httpVersionMinor === 1 && request.headers.host === undefined)
      done(new ApiError(400, 'missing Host header'));
    else done();
  });
  app.addHook('onResponse', accessLogHook(deps.metrics, deps.log, deps.accessLogSample ?? 1));
}

/** Every error as the envelope, with the status its kind calls for. */
function answerErrors(app: FastifyInstance, maxBodyBytes: number): void {
  app.setErrorHandler((err: FastifyError | ApiError, request, reply) => {
    if (err instanceof ApiError) {
      return reply.code(err.statusCode).headers(err.headers).send(fail(err.message));
    }
    if (err instanceof DomainError) {
      if (err.kind === 'unavailable') reply.header('retry-after', '1');
      return reply.code(STATUS_OF_KIND[err.kind]).send(fail(err.message));
    }
    if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) {
      // Answered before the body was read (Fastify then closes the connection): a lingering close
      // lets the client finish sending and read this answer instead of a reset.
      if (!request.raw.complete && reply.getHeader('connection') === 'close') lingerOnClose(request.raw.socket);
      const [status, message] = describeFastifyError(
        err,
        // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- unset when no route matched
        request.routeOptions.bodyLimit ?? maxBodyBytes,
      );
      return reply.code(status).send(fail(message));
    }
    // The database is down, restarting, locked or full: not a bug, and a retry may succeed (no log line per
    // request: the PostgreSQL store logs each outage once).
    if (isDatabaseUnavailable(err))
      return reply.code(503).header('retry-after', '5').send(fail('database unavailable, retry later'));
    request.log.error({ err }, 'unhandled error');
    return reply.code(500).send(fail('internal error'));
  });
}

/** Unknown routes: 405 with Allow when the path exists under another method, else 404 (both enveloped). */
function answerUnknownRoutes(app: FastifyInstance): void {
  const known: Array<{ method: string; re: RegExp }> = [];
  app.addHook('onRoute', (route) => {
    const re = new RegExp(`^${route.url.replace(/:[^/]+/g, '[^/]+')}/?$`);
    for (const m of [route.method].flat()) known.push({ method: m, re });
  });
  app.setNotFoundHandler(async (request, reply) => {
    const path = request.url.split('?')[0]!;
    const allowed = [...new Set(known.filter((k) => k.re.test(path)).map((k) => k.method))];
    if (allowed.length > 0) {
      return reply
        .code(405)
        .header('allow', allowed.join(', '))
        .send(fail(`method ${request.method} is not allowed on ${path}`));
    }
    return reply.code(404).send(fail(`no route ${request.method} ${path}`));
  });
}

/** /api/v1: API-key auth (a key cache that revocations clear), rate limits, and the public routes. */
function apiRoutes(app: FastifyInstance, deps: HttpDeps): void {
  const keys = new KeyCache(deps.store.db);
  const dropKeys = () => keys.clear();
  deps.signals?.on(KEY_REVOKED_SIGNAL, dropKeys);
  app.addHook('onClose', async () => {
    keys.close();
    deps.signals?.off(KEY_REVOKED_SIGNAL, dropKeys);
  });
  app.decorateRequest('owner', '');
  app.decorateRequest('apiKeyId', '');

  app.register(
    async (api) => {
      api.addHook('onRequest', authHook(keys));
      await registerRateLimits(api, deps.rateLimits, deps.log);
      jobRoutes(api, deps.service);
      webhookRoutes(api, deps.webhooks);
      webhookEndpointRoutes(api, deps.endpoints);
      jobTypeRoutes(api, deps.catalogue, deps.allowPrivate);
      eventRoutes(api, { service: deps.service, signals: deps.signals, metrics: deps.metrics }, deps.eventStreams);
      jobDetailRoutes(api, deps.service, deps.store);
    },
    { prefix: '/api/v1' },
  );
}

/** The remote workers' and the operator's scopes (each with its own auth), then the unauthenticated routes. */
function otherRoutes(app: FastifyInstance, deps: HttpDeps, docs: OpenApiDeps): void {
  // Remote workers: their own scope and auth hook (worker tokens), beside the public API's.
  const remote = deps.remote;
  if (remote) {
    app.register(
      (w) =>
        workerRoutes(w, {
          store: deps.store,
          clock: deps.clock,
          remote: remote.work,
          maxOutputBytes: remote.maxOutputBytes,
        }),
      { prefix: '/api/v1/worker' },
    );
  }

  // The operator's routes: their own scope and auth hook (admin tokens), not the API-key hook.
  app.register(
    (admin) =>
      adminRoutes(admin, {
        operator: new Operator(deps.store, deps.clock),
        clock: deps.clock,
        localWorkers: deps.localWorkers,
      }),
    { prefix: '/admin/api' },
  );

  // In a plugin, so they are added after @fastify/swagger is listening for routes.
  app.register(async (root) => {
    opsRoutes(root, deps.store, deps.metrics, deps.storageHealth);
    docsRoutes(root, docs); // GET /api/v1/openapi.json (no API key, not enveloped) and /docs
    if (deps.localResults) resultRoutes(root, deps.localResults.store, deps.localResults.secret, deps.clock);
    await dashboardRoutes(root);
  });
}
