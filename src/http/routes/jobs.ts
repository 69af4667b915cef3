import type { FastifyInstance } from 'fastify';
import { checkIdempotencyKey } from '../../jobs/idempotency.js';
import type { JobService } from '../../jobs/service.js';
import { ApiError } from '../api-error.js';
import { ok } from '../envelope.js';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A malformed uuid is just a job that does not exist: same 404, same words. */
function jobId(params: unknown): string {
  const uuid = (params as { uuid: string }).uuid;
  if (!UUID_RE.test(uuid)) throw new ApiError(404, 'job not found');
  return uuid.toLowerCase();
}

function header(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

export function jobRoutes(app: FastifyInstance, service: JobService): void {
  app.post('/jobs/submit/:jobType', async (request, reply) => {
    const { jobType } = request.params as { jobType: string };
    const idempotencyKey = checkIdempotencyKey(header(request.headers['idempotency-key']));
    const outcome = await service.submit({
      owner: request.owner,
      jobType,
      body: request.body,
      idempotencyKey,
      requestId: request.id,
      method: 'POST',
      path: `/api/v1/jobs/submit/${jobType}`,
    });
    if (outcome.replayed) reply.header('idempotent-replayed', 'true').header('x-request-id', outcome.requestId);
    return reply.code(outcome.statusCode).send(outcome.body);
  });

  app.get('/jobs/:uuid/status', async (request) => ok(await service.status(request.owner, jobId(request.params))));

  app.post('/jobs/:uuid/cancel', async (request) => ok(await service.cancel(request.owner, jobId(request.params))));

  app.get('/jobs/:uuid/result', async (request) => ok(await service.result(request.owner, jobId(request.params))));
}
