import type { FastifyInstance } from 'fastify';
import { sql, type Kysely } from 'kysely';
import type { Metrics } from '../../metrics.js';
import type { Store } from '../../store/db.js';
import { isUpToDate } from '../../store/migrations.js';
import { fail, ok } from '../envelope.js';

/** Operations endpoints, outside /api/v1 and without API keys (keep them off the public edge). */
export function opsRoutes(app: FastifyInstance, store: Store, metrics: Metrics): void {
  // The process is up and serving HTTP.
  app.get('/healthz', async () => ok({ status: 'ok' }));

  // The database answers and every migration is applied: safe to route traffic here.
  app.get('/readyz', async (_request, reply) => {
    try {
      await sql`SELECT 1`.execute(store.db);
      if (!(await isUpToDate(store.db as Kysely<unknown>, store.dialect))) {
        return reply.code(503).send(fail('database migrations are not applied'));
      }
      return ok({ status: 'ready', database: store.dialect });
    } catch {
      return reply.code(503).send(fail('database is not reachable'));
    }
  });

  app.get('/metrics', async (_request, reply) => {
    reply.header('content-type', metrics.registry.contentType);
    return metrics.registry.metrics();
  });
}
