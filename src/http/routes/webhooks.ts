import type { FastifyInstance } from 'fastify';
import type { WebhookService } from '../../webhooks/service.js';
import { ApiError } from '../api-error.js';
import { ok } from '../envelope.js';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Malformed ids are ids that do not exist: same 404, same words. */
function ids(params: unknown): { uuid: string; eventId?: string } {
  const p = params as { uuid: string; eventId?: string };
  if (!UUID_RE.test(p.uuid)) throw new ApiError(404, 'job not found');
  if (p.eventId !== undefined && !UUID_RE.test(p.eventId)) return { uuid: p.uuid.toLowerCase(), eventId: '' };
  return { uuid: p.uuid.toLowerCase(), eventId: p.eventId?.toLowerCase() };
}

/** Delivery history and manual redelivery of a job's webhook events (inside the authenticated /api/v1 scope). */
export function webhookRoutes(app: FastifyInstance, webhooks: WebhookService): void {
  app.get('/jobs/:uuid/webhook-deliveries', async (request) => {
    const { uuid } = ids(request.params);
    return ok(await webhooks.list(request.owner, uuid));
  });

  app.post('/jobs/:uuid/webhook-deliveries/:eventId/redeliver', async (request) => {
    const { uuid, eventId } = ids(request.params);
    return ok(await webhooks.redeliver(request.owner, uuid, eventId!));
  });
}
