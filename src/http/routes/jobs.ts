import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { checkIdempotencyKey } from '../../jobs/idempotency.js';
import type { JobService } from '../../jobs/service.js';
import { JOB_STATUSES } from '../../jobs/states.js';
import { describeIssue } from '../../jobs/submit-schema.js';
import { ApiError } from '../api-error.js';
import { ok } from '../envelope.js';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Long polls hold a request open at most this long. */
export const MAX_WAIT_SECONDS = 60;

/** A malformed uuid is just a job that does not exist: same 404, same words. */
function jobId(params: unknown): string {
  const uuid = (params as { uuid: string }).uuid;
  if (!UUID_RE.test(uuid)) throw new ApiError(404, 'job not found');
  return uuid.toLowerCase();
}

function header(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

const waitSeconds = z.coerce.number().int().min(0).max(MAX_WAIT_SECONDS);

export const listQuery = z.strictObject({
  status: z.enum(JOB_STATUSES).optional(),
  job_type: z.string().min(1).max(100).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20),
  cursor: z.string().min(1).max(200).optional(),
});
export const statusQuery = z.strictObject({ wait: waitSeconds.optional() });

function parse<T extends z.ZodType>(schema: T, value: unknown): z.infer<T> {
  const r = schema.safeParse(value ?? {});
  if (!r.success) throw new ApiError(400, r.error.issues.slice(0, 3).map((i) => describeIssue(i, value)).join('; '));
  return r.data;
}

/** `Prefer: wait=N` (RFC 7240) on submit: answer once the job is terminal, or after N seconds. */
function preferWait(prefer: string | undefined): number {
  const m = prefer && /(?:^|[,;\s])wait\s*=\s*(\d+)/i.exec(prefer);
  return m ? Math.min(MAX_WAIT_SECONDS, Number(m[1])) : 0;
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
    if (outcome.replayed) {
      // A replay is the original response, byte for byte; it does not wait again.
      reply.header('idempotent-replayed', 'true').header('x-request-id', outcome.requestId);
      return reply.code(outcome.statusCode).send(outcome.body);
    }
    const wait = preferWait(header(request.headers.prefer));
    if (wait > 0) {
      reply.header('preference-applied', `wait=${wait}`);
      return reply.code(outcome.statusCode).send(ok(await service.status(request.owner, outcome.body.data.uuid, wait * 1000)));
    }
    return reply.code(outcome.statusCode).send(outcome.body);
  });

  app.get('/jobs', async (request) => {
    const q = parse(listQuery, request.query);
    return ok(await service.list(request.owner, { status: q.status, jobType: q.job_type, limit: q.limit, cursor: q.cursor }));
  });

  app.get('/jobs/:uuid/status', async (request) => {
    const uuid = jobId(request.params);
    const q = parse(statusQuery, request.query);
    return ok(await service.status(request.owner, uuid, (q.wait ?? 0) * 1000));
  });

  app.post('/jobs/:uuid/cancel', async (request) => ok(await service.cancel(request.owner, jobId(request.params))));

  app.get('/jobs/:uuid/result', async (request) => ok(await service.result(request.owner, jobId(request.params))));
}
