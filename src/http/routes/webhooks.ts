import type { FastifyInstance } from 'fastify';
import type { WebhookService } from '../../webhooks/service.js';
import { ApiError } from '../api-error.js';
import { z } from 'zod';
import { ok } from '../envelope.js';
import { COMMON_ERRORS, deliveryEnvelopeSchema, deliveryListEnvelopeSchema, responses, uuidParam } from '../schemas.js';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Malformed ids are ids that do not exist: same 404, same words. */
function ids(params: unknown): { uuid: string; eventId?: string } {
  const p = params as { uuid: string; event_id?: string };
  if (!UUID_RE.test(p.uuid)) throw new ApiError(404, 'job not found');
  if (p.event_id !== undefined && !UUID_RE.test(p.event_id)) return { uuid: p.uuid.toLowerCase(), eventId: '' };
  return { uuid: p.uuid.toLowerCase(), eventId: p.event_id?.toLowerCase() };
}

/** Delivery history and manual redelivery of a job's webhook events (inside the authenticated /api/v1 scope). */
export function webhookRoutes(app: FastifyInstance, webhooks: WebhookService): void {
  app.get(
    '/jobs/:uuid/webhook-deliveries',
    {
      schema: {
        operationId: 'listWebhookDeliveries',
        tags: ['Webhooks'],
        params: z.object({ uuid: uuidParam("The job's uuid.") }),
        response: responses(
          {
            200: {
              description: 'The deliveries (empty when the job has no webhook or is not terminal yet).',
              schema: deliveryListEnvelopeSchema,
            },
          },
          404,
          ...COMMON_ERRORS,
        ),
      },
    },
    async (request) => {
      const { uuid } = ids(request.params);
      return ok(await webhooks.list(request.owner, uuid));
    },
  );

  app.post(
    '/jobs/:uuid/webhook-deliveries/:event_id/redeliver',
    {
      schema: {
        operationId: 'redeliverWebhook',
        tags: ['Webhooks'],
        params: z.object({ uuid: uuidParam("The job's uuid."), event_id: uuidParam('The event to send again.') }),
        response: responses(
          { 200: { description: 'The delivery, with the new attempt.', schema: deliveryEnvelopeSchema } },
          404,
          415,
          ...COMMON_ERRORS,
        ),
      },
    },
    async (request) => {
      const { uuid, eventId } = ids(request.params);
      return ok(await webhooks.redeliver(request.owner, uuid, eventId!));
    },
  );
}
