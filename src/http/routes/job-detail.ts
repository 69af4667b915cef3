import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { JobService } from '../../jobs/service.js';
import type { Store } from '../../store/store.js';
import { getJob } from '../../store/jobs.js';
import { ApiError } from '../api-error.js';
import { ok } from '../envelope.js';
import { apiJobSchema, COMMON_ERRORS, jobParams, jobUuid, okEnvelope, responses } from '../schemas.js';
import { zodApp } from '../zod-app.js';

export const jobDetailSchema = apiJobSchema
  .extend({
    input: z
      .record(z.string(), z.unknown())
      .describe('The `input` the job was submitted with (media URLs and options).'),
    webhook: z
      .looseObject({ url: z.string(), events: z.array(z.string()).optional() })
      .nullable()
      .describe('The webhook it notifies, without its secret; null when none was given.'),
  })
  .describe('A job with what it was submitted with.');

/**
 * GET /api/v1/jobs/{uuid}: the job object plus its submitted `input` and webhook (never the
 * webhook secret). The status route stays the hot, narrow read; this one is for pages that show
 * a job (the dashboard), by primary key.
 */
export function jobDetailRoutes(scope: FastifyInstance, service: JobService, store: Store): void {
  zodApp(scope).get(
    '/jobs/:uuid',
    {
      schema: {
        operationId: 'getJob',
        tags: ['Jobs'],
        params: jobParams,
        response: responses(
          { 200: { description: 'The job with its input.', schema: okEnvelope(jobDetailSchema) } },
          404,
          ...COMMON_ERRORS,
        ),
      },
    },
    async (request) => {
      const uuid = jobUuid(request.params.uuid);
      const job = await service.status(request.owner, uuid);
      const row = await getJob(store.db, uuid, request.owner);
      if (!row) throw new ApiError(404, 'job not found');
      const hook = row.webhook ? (JSON.parse(row.webhook) as { url: string; events?: string[] }) : null;
      return ok({
        ...job,
        input: JSON.parse(row.input) as Record<string, unknown>,
        webhook: hook ? { url: hook.url, ...(hook.events ? { events: hook.events } : {}) } : null,
      });
    },
  );
}
