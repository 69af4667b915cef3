import type { FastifyInstance } from 'fastify';
import { sql, type Kysely } from 'kysely';
import type { Metrics } from '../../metrics.js';
import type { StorageHealth } from '../../storage/health.js';
import type { Store } from '../../store/store.js';
import { isDatabaseUnavailable } from '../../store/errors.js';
import { isUpToDate } from '../../store/migrate.js';
import { z } from 'zod';
import { fail, ok } from '../envelope.js';
import { healthEnvelopeSchema, responses } from '../schemas.js';

const open = (operationId: string) => ({ operationId, tags: ['Operations'], security: [] });

/** /readyz answers within this long whatever the database does (a load balancer must not hang on it). */
const READY_TIMEOUT_MS = 3_000;

/** Why the database cannot take traffic now, or undefined when it can. */
async function databaseProblem(store: Store): Promise<string | undefined> {
  const check = (async () => {
    await sql`SELECT 1`.execute(store.db);
    return (await isUpToDate(store.db as Kysely<unknown>, store.dialect))
      ? undefined
      : 'database migrations are not applied';
  })();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<string>((resolve) => {
    timer = setTimeout(
      () => resolve(`database unavailable: no answer within ${READY_TIMEOUT_MS / 1000} s`),
      READY_TIMEOUT_MS,
    );
  });
  try {
    return await Promise.race([check, late]);
  } catch (err) {
    const e = err as { code?: unknown; message?: unknown };
    const what = typeof e.code === 'string' ? `${e.code}: ${String(e.message)}` : String(e.message ?? err);
    return isDatabaseUnavailable(err) ? `database unavailable: ${what}` : `database check failed: ${what}`;
  } finally {
    clearTimeout(timer);
    check.catch(() => {}); // a check that lost the race still settles later
  }
}

/** Operations endpoints, outside /api/v1 and without API keys (keep them off the public edge). */
export function opsRoutes(app: FastifyInstance, store: Store, metrics: Metrics, storage?: StorageHealth): void {
  livenessRoute(app);
  readinessRoute(app, store, storage);
  metricsRoute(app, metrics);
}

/** GET /healthz: the process is up and serving HTTP. */
function livenessRoute(app: FastifyInstance): void {
  app.get(
    '/healthz',
    {
      schema: {
        ...open('healthz'),
        response: responses({ 200: { description: 'Alive.', schema: healthEnvelopeSchema } }),
      },
    },
    async () => ok({ status: 'ok' }),
  );
}

/**
 * GET /readyz: the database answers and every migration is applied, and this process's result
 * uploads are not failing for an outage or a full disk: safe to route traffic here. Otherwise: 503
 * with the reason, within READY_TIMEOUT_MS.
 */
function readinessRoute(app: FastifyInstance, store: Store, storage?: StorageHealth): void {
  app.get(
    '/readyz',
    {
      schema: {
        ...open('readyz'),
        response: responses({ 200: { description: 'Ready.', schema: healthEnvelopeSchema } }, 503),
      },
    },
    async (_request, reply) => {
      const problem = (await databaseProblem(store)) ?? (await storage?.problem());
      if (problem) return reply.code(503).header('retry-after', '5').send(fail(problem));
      return ok({ status: 'ready', database: store.dialect });
    },
  );
}

/** GET /metrics: the Prometheus text exposition. */
function metricsRoute(app: FastifyInstance, metrics: Metrics): void {
  app.get(
    '/metrics',
    {
      schema: {
        ...open('metrics'),
        response: responses({ 200: { description: 'Metrics.', schema: z.string(), type: 'text/plain' } }),
      },
    },
    async (_request, reply) => {
      reply.header('content-type', metrics.registry.contentType);
      return metrics.registry.metrics();
    },
  );
}
