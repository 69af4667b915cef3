import type { FastifyInstance } from 'fastify';
import { submitSchema, toJsonSchema } from '../../jobs/submit-schema.js';
import type { Catalogue } from '../../processors/catalogue.js';
import { SLOT_NAMES } from '../../contract/api.js';
import { ok } from '../envelope.js';
import { COMMON_ERRORS, jobTypesEnvelopeSchema, responses } from '../schemas.js';

/** Discovery, rendered once from the catalogue: the same schemas that validate submits. */
export function describeJobTypes(catalogue: Catalogue, allowPrivate: boolean) {
  return catalogue.list().map((t) => ({
    name: t.name,
    description: t.description,
    submit_path: `/api/v1/jobs/submit/${t.name}`,
    slots: Object.fromEntries(SLOT_NAMES.filter((s) => t.slots[s]).map((s) => [s, t.slots[s]])),
    models: t.models,
    options: toJsonSchema(t.options),
    body_schema: toJsonSchema(submitSchema(t, { allowPrivate })),
  }));
}

export function jobTypeRoutes(app: FastifyInstance, catalogue: Catalogue, allowPrivate: boolean): void {
  const body = ok({ job_types: describeJobTypes(catalogue, allowPrivate) });
  app.get(
    '/job-types',
    {
      schema: {
        operationId: 'listJobTypes',
        tags: ['Job types'],
        response: responses(
          { 200: { description: 'The catalogue.', schema: jobTypesEnvelopeSchema } },
          ...COMMON_ERRORS,
        ),
      },
    },
    async () => body,
  );
}
