import type { FastifyInstance } from 'fastify';
import type { WebhookService } from '../../webhooks/service.js';
import { z } from 'zod';
import { ok } from '../envelope.js';
import {
  COMMON_ERRORS,
  deliveryEnvelopeSchema,
  deliveryListEnvelopeSchema,
  eventUuid,
  jobParams,
  jobUuid,
  responses,
  uuidParam,
} from '../schemas.js';
import { zodApp, type ZodApp } from '../zod-app.js';

/** Delivery history and manual redelivery of a job's webhook events (inside the authenticated /api/v1 scope). */
export function webhookRoutes(scope: FastifyInstance, webhooks: WebhookService): void {
  const app = zodApp(scope);
  deliveriesRoute(app, webhooks);
  redeliverRoute(app, webhooks);
}

/** GET /jobs/:uuid/webhook-deliveries: the job's webhook events and their attempts. */
function deliveriesRoute(app: ZodApp, webhooks: WebhookService): void {
  app.get(
    '/jobs/:uuid/webhook-deliveries',
    {
      schema: {
        operationId: 'listWebhookDeliveries',
        tags: ['Webhooks'],
        params: jobParams,
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
      const uuid = jobUuid(request.params.uuid);
      return ok(await webhooks.list(request.owner, uuid));
    },
  );
}

/** POST /jobs/:uuid/webhook-deliveries/:event_id/redeliver: one more attempt now, recorded as manual. */
function redeliverRoute(app: ZodApp, webhooks: WebhookService): void {
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
      const uuid = jobUuid(request.params.uuid);
      const eventId = eventUuid(request.params.event_id);
      return ok(await webhooks.redeliver(request.owner, uuid, eventId));
    },
  );
}
