import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { checkIdempotencyKey } from '../../jobs/idempotency.js';
import { isKeptJob, type BatchPlan, type JobService } from '../../jobs/service.js';
import { setSubmitWeight } from '../rate-limit.js';
import { DURATION_SYNTAX, durationRange } from '../../jobs/submit-schema.js';
import { parseSubmitDuration } from '../../jobs/durations.js';
import { DomainError, invalid } from '../../errors.js';
import {
  CANCEL_AFTER_HEADER,
  CANCEL_AFTER_MAX_MS,
  CANCEL_AFTER_MIN_MS,
  JOB_STATUSES,
  type ApiJob,
  type BatchItemResult,
} from '../../contract/api.js';
import { STATUS_OF_KIND } from '../api-error.js';
import { JSON_CONTENT_TYPE, ok } from '../envelope.js';
import { withFastCheck } from '../validation.js';
import {
  COMMON_ERRORS,
  batchEnvelopeSchema,
  jobEnvelopeSchema,
  jobListEnvelopeSchema,
  resultLinkEnvelopeSchema,
  responses,
  jobParams,
  jobUuid,
} from '../schemas.js';

/** Long polls hold a request open at most this long. */
export const MAX_WAIT_SECONDS = 60;

function header(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

const waitSeconds = z.coerce.number().int().min(0).max(MAX_WAIT_SECONDS);

export const listQuery = z.strictObject({
  status: z.enum(JOB_STATUSES).optional().describe('Only jobs in this state.'),
  job_type: z.string().min(1).max(100).optional().describe('Only jobs of this type.'),
  limit: z.coerce.number().int().min(1).max(100).default(20).describe('Page size.'),
  cursor: z.string().min(1).max(200).optional().describe('`next_cursor` of the previous page.'),
});
export const statusQuery = withFastCheck(
  z.strictObject({
    wait: waitSeconds
      .default(0)
      .describe('Long-poll: hold the request up to this many seconds until the job is terminal.'),
  }),
  // The polls' two shapes: no query, or `?wait=N` in plain digits.
  (query) => {
    const q = query as Record<string, unknown>;
    let keys = 0;
    for (const k in q) {
      if (k !== 'wait') return undefined;
      keys++;
    }
    if (keys === 0) return { wait: 0 };
    const wait = typeof q.wait === 'string' && /^\d{1,2}$/.test(q.wait) ? Number(q.wait) : MAX_WAIT_SECONDS + 1;
    return wait <= MAX_WAIT_SECONDS ? { wait } : undefined;
  },
);

/** Prose and examples of these operations live in http/openapi.ts (keyed by operationId). */
const doc = (operationId: string, tags: string[]) => ({ operationId, tags });

/** `Prefer: wait=N` (RFC 7240) on submit: answer once the job is terminal, or after N seconds. */
function preferWait(prefer: string | undefined): number {
  const m = prefer && /(?:^|[,;\s])wait\s*=\s*(\d+)/i.exec(prefer);
  return m ? Math.min(MAX_WAIT_SECONDS, Number(m[1])) : 0;
}

/**
 * The `Cancel-After` header (Replicate's) is the body's `cancel_after`: checked as itself (a bad
 * one is named as the header), then moved into the body (so the idempotency fingerprint sees it);
 * both given and different is a 400.
 */
export function withCancelAfter(body: unknown, headerValue: string | undefined): unknown {
  if (headerValue === undefined) return body;
  const ms = parseSubmitDuration(headerValue);
  if (ms === undefined) throw invalid(`${CANCEL_AFTER_HEADER}: ${DURATION_SYNTAX}`);
  if (ms < CANCEL_AFTER_MIN_MS || ms > CANCEL_AFTER_MAX_MS)
    throw invalid(`${CANCEL_AFTER_HEADER}: ${durationRange(CANCEL_AFTER_MIN_MS, CANCEL_AFTER_MAX_MS)}`);
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return body;
  const given = (body as { cancel_after?: unknown }).cancel_after;
  if (given === undefined) return { ...body, cancel_after: headerValue };
  if (parseSubmitDuration(given) !== ms) {
    throw invalid(`${CANCEL_AFTER_HEADER}: differs from the body's cancel_after; give one of them`);
  }
  return body;
}

/** The batch body: the items are checked one by one by the service (one bad item refuses only itself). */
export const batchBody = (maxItems: number) =>
  z.strictObject({
    jobs: z
      .array(z.unknown())
      .min(1)
      .max(maxItems)
      .describe(
        `1 to ${maxItems} submit bodies, each with its \`job_type\` and an optional \`idempotency_key\` of its own.`,
      ),
  });

const withZod = (scope: FastifyInstance) => scope.withTypeProvider<ZodTypeProvider>();
type ZodApp = ReturnType<typeof withZod>;

/** The job routes, in the document's order. */
export function jobRoutes(scope: FastifyInstance, service: JobService): void {
  const app = withZod(scope);
  submitRoute(app, service);
  batchRoute(app, service);
  deleteRoute(app, service);
  listRoute(app, service);
  statusRoute(app, service);
  cancelRoute(app, service);
  resultRoute(app, service);
}

/**
 * POST /jobs/submit/{jobType}. The body is validated by the service against the job type's catalogue
 * schema (its messages); the document expands this route into one operation per job type (openapi.ts).
 */
function submitRoute(app: ZodApp, service: JobService): void {
  app.post(
    '/jobs/submit/:jobType',
    {
      schema: {
        ...doc('submit', ['Jobs']),
        params: z.object({ jobType: z.string().describe('The job type (GET /job-types lists them).') }),
        response: responses(
          {
            200: {
              description: 'The job, queued. A replay of an idempotent request returns the original response.',
              schema: jobEnvelopeSchema,
            },
          },
          400,
          409,
          413,
          415,
          ...COMMON_ERRORS,
        ),
      },
    },
    async (request, reply) => {
      const { jobType } = request.params;
      const idempotencyKey = checkIdempotencyKey(header(request.headers['idempotency-key']));
      const outcome = await service.submit({
        owner: request.owner,
        jobType,
        body: withCancelAfter(request.body, header(request.headers['cancel-after'])),
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
        return reply
          .code(outcome.statusCode)
          .send(ok(await service.status(request.owner, outcome.body.data.uuid, wait * 1000)));
      }
      return reply.code(outcome.statusCode).send(outcome.body);
    },
  );
}

/** POST /jobs/batch: every item planned (replays found), then the fresh ones created in one transaction. */
function batchRoute(app: ZodApp, service: JobService): void {
  const plans = new WeakMap<FastifyRequest, BatchPlan>();
  app.post(
    '/jobs/batch',
    {
      schema: {
        ...doc('submitBatch', ['Jobs']),
        body: batchBody(service.maxBatchItems),
        response: responses(
          {
            200: {
              description:
                'One result per item, in order: `status` is the HTTP status the item alone would have got, `data` its job (or `{}`).',
              schema: batchEnvelopeSchema,
            },
          },
          400,
          413,
          415,
          ...COMMON_ERRORS,
        ),
      },
      // Before the rate limit (rate-limit.ts adds it after the route's own): items that replay a
      // stored submit are not counted again.
      preHandler: async (request) => {
        const plan = await service.planBatch({
          owner: request.owner,
          items: request.body.jobs,
          batchKey: checkIdempotencyKey(header(request.headers['idempotency-key'])),
          requestId: request.id,
        });
        plans.set(request, plan);
        setSubmitWeight(request, plan.fresh);
      },
    },
    async (request, reply) => {
      const outcomes = await service.submitBatch(plans.get(request)!);
      const items: BatchItemResult[] = outcomes.map((o) =>
        o instanceof DomainError
          ? { code: -1, message: o.message, status: STATUS_OF_KIND[o.kind], data: {} }
          : {
              code: 0,
              message: 'ok',
              status: o.statusCode,
              data: o.body.data,
              ...(o.replayed ? { replayed: true } : {}),
            },
      );
      // A retried batch: every job it answers was created by an earlier request with its keys.
      const replayed = outcomes.some((o) => !(o instanceof DomainError) && o.replayed);
      if (replayed && outcomes.every((o) => o instanceof DomainError || o.replayed))
        reply.header('idempotent-replayed', 'true');
      return ok({ items });
    },
  );
}

/** DELETE /jobs/{uuid}: the purge (the job stays as a tombstone). */
function deleteRoute(app: ZodApp, service: JobService): void {
  app.delete(
    '/jobs/:uuid',
    {
      schema: {
        ...doc('deleteJob', ['Jobs']),
        params: jobParams,
        response: responses(
          {
            200: {
              description:
                'The job as a tombstone: its input, webhook and result are deleted, `data_removed` is true. A repeat answers the same.',
              schema: jobEnvelopeSchema,
            },
          },
          404,
          409,
          ...COMMON_ERRORS,
          503,
        ),
      },
    },
    async (request) => ok(await service.delete(request.owner, jobUuid(request.params.uuid))),
  );
}

/** GET /jobs: one page of the owner's jobs. */
function listRoute(app: ZodApp, service: JobService): void {
  app.get(
    '/jobs',
    {
      schema: {
        ...doc('listJobs', ['Jobs']),
        querystring: listQuery,
        response: responses(
          { 200: { description: 'One page of jobs.', schema: jobListEnvelopeSchema } },
          400,
          ...COMMON_ERRORS,
        ),
      },
    },
    async (request) => {
      const q = request.query;
      return ok(
        await service.list(request.owner, { status: q.status, jobType: q.job_type, limit: q.limit, cursor: q.cursor }),
      );
    },
  );
}

/** The serialised envelope of each job the status reads keep (the same job object until the database changes). */
const keptBodies = new WeakMap<ApiJob, string>();

/** The envelope of a kept job, serialised once, as the route's serializer would (JSON.stringify). */
function keptBody(job: ApiJob): string {
  let body = keptBodies.get(job);
  if (body === undefined) keptBodies.set(job, (body = JSON.stringify(ok(job))));
  return body;
}

/** GET /jobs/{uuid}/status, the hottest route: `?wait=N` long-polls until the job is terminal. */
function statusRoute(app: ZodApp, service: JobService): void {
  app.get(
    '/jobs/:uuid/status',
    {
      schema: {
        ...doc('getJobStatus', ['Jobs']),
        params: jobParams,
        querystring: statusQuery,
        response: responses(
          { 200: { description: 'The job.', schema: jobEnvelopeSchema } },
          400,
          404,
          ...COMMON_ERRORS,
        ),
      },
    },
    // Not async: a poll answered from the SQLite connection (statusNow) goes out without a promise.
    (request, reply) => {
      const uuid = jobUuid(request.params.uuid);
      const wait = request.query.wait;
      const job = wait > 0 ? service.status(request.owner, uuid, wait * 1000) : service.statusNow(request.owner, uuid);
      if (job instanceof Promise) return job.then(ok);
      if (!isKeptJob(job)) return ok(job);
      // A string goes out as it is when its type is set (the bytes and headers the serializer would give).
      void reply.header('content-type', JSON_CONTENT_TYPE);
      return keptBody(job);
    },
  );
}

/** POST /jobs/{uuid}/cancel. */
function cancelRoute(app: ZodApp, service: JobService): void {
  app.post(
    '/jobs/:uuid/cancel',
    {
      schema: {
        ...doc('cancelJob', ['Jobs']),
        params: jobParams,
        // No body: none, or `{}` (anything else is a 400 naming it, so a misplaced field is not ignored).
        body: z.strictObject({}).optional().describe('No body is needed; an empty body or `{}` is fine.'),
        response: responses(
          { 200: { description: 'The cancelled job.', schema: jobEnvelopeSchema } },
          400,
          404,
          409,
          415,
          ...COMMON_ERRORS,
        ),
      },
    },
    async (request) => ok(await service.cancel(request.owner, jobUuid(request.params.uuid))),
  );
}

/** GET /jobs/{uuid}/result: the signed result link. */
function resultRoute(app: ZodApp, service: JobService): void {
  app.get(
    '/jobs/:uuid/result',
    {
      schema: {
        ...doc('getJobResult', ['Jobs']),
        params: jobParams,
        response: responses(
          { 200: { description: 'The signed result link.', schema: resultLinkEnvelopeSchema } },
          404,
          409,
          410,
          ...COMMON_ERRORS,
        ),
      },
    },
    async (request) => ok(await service.result(request.owner, jobUuid(request.params.uuid))),
  );
}
