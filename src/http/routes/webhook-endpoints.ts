import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { EndpointService } from '../../webhooks/endpoints.js';
import { ok } from '../envelope.js';
import {
  COMMON_ERRORS,
  endpointChangesSchema,
  endpointDeliveryListEnvelopeSchema,
  endpointEnvelopeSchema,
  endpointListEnvelopeSchema,
  newEndpointSchema,
  okEnvelope,
  recoverSchema,
  responses,
} from '../schemas.js';
import { zodApp, type ZodApp } from '../zod-app.js';

const endpointParams = z.object({ id: z.string().describe("The endpoint's id (`ep_…`).") });
/** An operation's names and prose, for the OpenAPI document. */
const doc = (operationId: string, summary: string, description: string) => ({
  operationId,
  summary,
  description,
  tags: ['Webhook endpoints'],
});
const emptyEnvelope = okEnvelope(z.looseObject({}));
const secretEnvelope = okEnvelope(
  z.looseObject({ secret: z.string().describe('The new `whsec_…` secret (the old one signs too, for the overlap).') }),
);
const countEnvelope = okEnvelope(z.looseObject({ count: z.int().min(0).describe('Deliveries queued again.') }));
const deliveriesQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(50).describe('At most this many (1–100, default 50).'),
  cursor: z.string().max(200).optional().describe('`next_cursor` of the previous page.'),
});
/** A 200 answering with the endpoint. */
const one = (description: string) => ({ 200: { description, schema: endpointEnvelopeSchema } });

/** Owner webhook endpoints (inside the authenticated /api/v1 scope): CRUD, rotation, enable, recover, log. */
export function webhookEndpointRoutes(scope: FastifyInstance, endpoints: EndpointService): void {
  const app = zodApp(scope);
  collectionRoutes(app, endpoints);
  endpointRoutes(app, endpoints);
  rotateRoute(app, endpoints);
  enableRoute(app, endpoints);
  recoverRoute(app, endpoints);
  deliveriesRoute(app, endpoints);
}

/** POST and GET /webhook-endpoints: register one, list the owner's. */
function collectionRoutes(app: ZodApp, endpoints: EndpointService): void {
  const create = {
    ...doc(
      'createWebhookEndpoint',
      'Register a webhook endpoint',
      "Every terminal event of the owner's jobs that the endpoint subscribes to is delivered to it, besides a job's own webhook. The answer carries the endpoint's `whsec_` secret.",
    ),
    body: newEndpointSchema,
    response: responses(
      { 201: { description: 'The endpoint, with its `whsec_` secret.', schema: endpointEnvelopeSchema } },
      400,
      409,
      415,
      ...COMMON_ERRORS,
    ),
  };
  app.post('/webhook-endpoints', { schema: create }, async (request, reply) =>
    reply.code(201).send(ok(await endpoints.create(request.owner, request.body))),
  );
  const list = {
    ...doc('listWebhookEndpoints', "List the owner's webhook endpoints", "The caller's endpoints, newest first."),
    response: responses(
      { 200: { description: 'Your endpoints, newest first.', schema: endpointListEnvelopeSchema } },
      ...COMMON_ERRORS,
    ),
  };
  app.get('/webhook-endpoints', { schema: list }, async (request) => ok(await endpoints.list(request.owner)));
}

/** GET, PATCH and DELETE /webhook-endpoints/:id: one endpoint of the caller's (another owner's: 404). */
function endpointRoutes(app: ZodApp, endpoints: EndpointService): void {
  const get = {
    ...doc(
      'getWebhookEndpoint',
      'Read a webhook endpoint',
      "One endpoint of the caller's, with its secret; another owner's id answers 404.",
    ),
    params: endpointParams,
    response: responses(one('The endpoint.'), 404, ...COMMON_ERRORS),
  };
  app.get('/webhook-endpoints/:id', { schema: get }, async (request) =>
    ok(await endpoints.get(request.owner, request.params.id)),
  );
  const update = {
    ...doc(
      'updateWebhookEndpoint',
      'Change a webhook endpoint',
      'Changes its URL, events or description; fields left out stay as they are.',
    ),
    params: endpointParams,
    body: endpointChangesSchema,
    response: responses(one('The endpoint, changed.'), 400, 404, 415, ...COMMON_ERRORS),
  };
  app.patch('/webhook-endpoints/:id', { schema: update }, async (request) =>
    ok(await endpoints.update(request.owner, request.params.id, request.body)),
  );
  const remove = {
    ...doc(
      'deleteWebhookEndpoint',
      'Delete a webhook endpoint',
      'No further deliveries go to it; its pending deliveries are skipped.',
    ),
    params: endpointParams,
    response: responses(
      { 200: { description: 'Deleted; its pending deliveries are skipped.', schema: emptyEnvelope } },
      404,
      ...COMMON_ERRORS,
    ),
  };
  app.delete('/webhook-endpoints/:id', { schema: remove }, async (request) =>
    ok(await endpoints.remove(request.owner, request.params.id)),
  );
}

/** POST /webhook-endpoints/:id/rotate-secret: a new secret; the old one signs too for the overlap. */
function rotateRoute(app: ZodApp, endpoints: EndpointService): void {
  const schema = {
    ...doc(
      'rotateWebhookEndpointSecret',
      "Rotate an endpoint's secret",
      'A new `whsec_` secret; for WEBHOOK_SECRET_OVERLAP deliveries are signed with both the new and the old one.',
    ),
    params: endpointParams,
    response: responses(
      { 200: { description: 'The new secret.', schema: secretEnvelope } },
      404,
      415,
      ...COMMON_ERRORS,
    ),
  };
  app.post('/webhook-endpoints/:id/rotate-secret', { schema }, async (request) =>
    ok(await endpoints.rotate(request.owner, request.params.id)),
  );
}

/** POST /webhook-endpoints/:id/enable: deliveries resume (a disabled endpoint). */
function enableRoute(app: ZodApp, endpoints: EndpointService): void {
  const schema = {
    ...doc(
      'enableWebhookEndpoint',
      'Enable a disabled endpoint',
      'Deliveries resume for new events; what was skipped is not resent (see recover).',
    ),
    params: endpointParams,
    response: responses(one('The endpoint, enabled.'), 404, 415, ...COMMON_ERRORS),
  };
  app.post('/webhook-endpoints/:id/enable', { schema }, async (request) =>
    ok(await endpoints.enable(request.owner, request.params.id)),
  );
}

/** POST /webhook-endpoints/:id/recover: queues again what failed or was skipped since a time. */
function recoverRoute(app: ZodApp, endpoints: EndpointService): void {
  const schema = {
    ...doc(
      'recoverWebhookEndpoint',
      'Re-send missed deliveries',
      'Queues once more every failed or skipped delivery of the endpoint whose event occurred since the given time; answers how many.',
    ),
    params: endpointParams,
    body: recoverSchema,
    response: responses(
      { 200: { description: 'How many deliveries were queued again.', schema: countEnvelope } },
      400,
      404,
      415,
      ...COMMON_ERRORS,
    ),
  };
  app.post('/webhook-endpoints/:id/recover', { schema }, async (request) =>
    ok(await endpoints.recover(request.owner, request.params.id, request.body.since)),
  );
}

/** GET /webhook-endpoints/:id/deliveries: the endpoint's delivery log, in pages. */
function deliveriesRoute(app: ZodApp, endpoints: EndpointService): void {
  const schema = {
    ...doc('listWebhookEndpointDeliveries', "List an endpoint's deliveries", 'Its deliveries, newest first, in pages.'),
    params: endpointParams,
    querystring: deliveriesQuery,
    response: responses(
      {
        200: {
          description: "The endpoint's deliveries with their attempts, newest first.",
          schema: endpointDeliveryListEnvelopeSchema,
        },
      },
      400,
      404,
      ...COMMON_ERRORS,
    ),
  };
  app.get('/webhook-endpoints/:id/deliveries', { schema }, async (request) =>
    ok(await endpoints.deliveries(request.owner, request.params.id, request.query.limit, request.query.cursor)),
  );
}
