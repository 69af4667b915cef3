import type { SwaggerOptions } from '@fastify/swagger';
import { createJsonSchemaTransform, createJsonSchemaTransformObject } from 'fastify-type-provider-zod';
import { submitSchema, toJsonSchema, webhookSchema } from '../jobs/submit-schema.js';
import type { Catalogue } from '../processors/catalogue.js';
import { base } from './openapi/base.js';
import { SUCCESS_HEADERS } from './openapi/headers.js';
import { API, pascal, ref, type Json } from './openapi/json.js';
import { PROSE } from './openapi/prose.js';
import { batchItemSchemas, SUBMIT_TEMPLATE, submitOperations } from './openapi/submit.js';
import { webhookOperations } from './openapi/webhooks.js';
import { COMPONENT_IDS, componentRegistry, ERROR_RESPONSES } from './schemas.js';

/**
 * The OpenAPI 3.1 document. Paths, parameters and response shapes come from the routes' own zod
 * schemas (@fastify/swagger + fastify-type-provider-zod: the same schemas that validate requests),
 * component schemas from the registry in schemas.ts, and the per-job-type submit bodies from the
 * catalogue (submit-schema.ts). What is left here is what no schema can say: prose, examples,
 * response headers, the webhooks, and the expansion of the submit route into one operation per job
 * type: each a named part in openapi/ (base, headers, errors, prose, examples, submit, webhooks),
 * put together here. test/openapi checks the result against the OpenAPI 3.1 meta-schema, against
 * every route the server registers, and against real responses.
 */

export interface OpenApiDeps {
  catalogue: Catalogue;
  allowPrivate: boolean;
  /** The configured delivery schedule and timeout (WEBHOOK_RETRY_SCHEDULE, WEBHOOK_TIMEOUT). */
  webhookRetryScheduleMs: readonly number[];
  webhookTimeoutMs: number;
  /** Open event streams per owner (GET /jobs/{uuid}/events answers 429 past it). */
  maxStreamsPerOwner: number;
}

/** JSON Schema keywords that clutter the document without helping a reader or a generator. */
function tidy(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(tidy);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Json = {};
  const s = schema as Json;
  for (const [k, v] of Object.entries(s)) {
    if (k === '$schema' || k === '$id') continue;
    // zod spells out long regexes next to the format; the format says it.
    if (k === 'pattern' && typeof s.format === 'string' && ['date-time', 'uuid', 'email', 'uri'].includes(s.format))
      continue;
    out[k] = tidy(v);
  }
  // z.literal(0) renders as a number; the envelope's code is an integer.
  if (out.type === 'number' && Number.isInteger(out.const)) out.type = 'integer';
  return out;
}

/**
 * @fastify/swagger's options: the document's fixed parts, fastify-type-provider-zod's transforms
 * for the routes' zod schemas, and the additions above. Built once, on the first request for it.
 */
export function swaggerOptions(deps: OpenApiDeps): SwaggerOptions {
  const transform = createJsonSchemaTransform({ schemaRegistry: componentRegistry, skipList: [] });
  const transformObject = createJsonSchemaTransformObject({ schemaRegistry: componentRegistry });
  return {
    openapi: base(),
    hideUntagged: false,
    transform,
    transformObject: (input) => finish(transformObject(input), deps),
  };
}

function finish(doc: Json, deps: OpenApiDeps): Json {
  const types = deps.catalogue.list();
  const components = doc.components as { schemas: Record<string, Json> };
  const schemas = tidy(components.schemas) as Record<string, Json>;
  schemas.WebhookSettings = tidy(toJsonSchema(webhookSchema({ allowPrivate: deps.allowPrivate }))) as Json;
  for (const t of types) {
    const body = tidy(toJsonSchema(submitSchema(t, { allowPrivate: deps.allowPrivate }))) as Json;
    const props = body.properties as Json | undefined;
    if (props?.webhook) props.webhook = ref('schemas', 'WebhookSettings');
    schemas[`Submit${pascal(t.name)}`] = { title: `${t.name} submit body`, description: t.description, ...body };
  }
  for (const t of types) {
    if (!t.resultSchema) continue;
    const result = tidy(toJsonSchema(t.resultSchema, 'output')) as Json;
    schemas[`${pascal(t.name)}Result`] = { title: `${t.name} result`, ...result };
  }
  batchItemSchemas(types, schemas);
  components.schemas = schemas;
  doc.jsonSchemaDialect = 'https://spec.openapis.org/oas/3.1/dialect/base';

  const paths = doc.paths as Record<string, Record<string, Json>>;
  for (const [path, item] of Object.entries(paths)) {
    for (const op of Object.values(item)) {
      finishParameters(op);
      finishOperation(op, path.startsWith(`${API}/`) && op.operationId !== 'getOpenApi');
    }
  }
  const batch = paths[`${API}/jobs/batch`]?.post;
  const jobs = (batch?.requestBody as { content: Record<string, { schema: Json }> } | undefined)?.content[
    'application/json'
  ]?.schema.properties as Record<string, Json> | undefined;
  if (jobs?.jobs) jobs.jobs.items = ref('schemas', 'BatchItem');
  const template = paths[SUBMIT_TEMPLATE]?.post;
  Reflect.deleteProperty(paths, SUBMIT_TEMPLATE);
  if (template) Object.assign(paths, submitOperations(types, template));
  const download = paths['/results/{key}']?.get?.responses as Record<string, Json> | undefined;
  const json = (download?.['200']?.content as Record<string, Json> | undefined)?.['application/json'];
  if (json) json.schema = jsonResult(types);
  doc.webhooks = webhookOperations(deps);
  const events = paths[`${API}/jobs/{uuid}/events`]?.get;
  if (events) {
    events.description = `${String(events.description)} More than ${deps.maxStreamsPerOwner} open streams per owner answer 429.`;
  }
  // The transform renders an input twin (`JobInput`…) of every component; only request bodies would use them.
  const twins = new Set(COMPONENT_IDS.map((id) => `${id}Input`));
  const used = JSON.stringify({
    ...doc,
    components: { ...components, schemas: Object.fromEntries(Object.entries(schemas).filter(([k]) => !twins.has(k))) },
  });
  if (![...twins].some((t) => used.includes(`"#/components/schemas/${t}"`)))
    for (const t of twins) Reflect.deleteProperty(schemas, t);
  return doc;
}

/** A JSON result's schema: one of the job types' declared results (resultSchema), else another type's own JSON. */
function jsonResult(types: ReturnType<Catalogue['list']>): Json {
  const declared = types.filter((t) => t.resultSchema);
  if (declared.length === 0) return {};
  return {
    description: `The result of ${declared.map((t) => `\`${t.name}\``).join(', ')} as its schema says; of another job type (a remote one), its own JSON.`,
    anyOf: [
      ...declared.map((t) => ref('schemas', `${pascal(t.name)}Result`)),
      // Any JSON value (an empty schema here is one the linters call illogical).
      { type: ['object', 'array', 'string', 'number', 'boolean', 'null'], items: {} },
    ],
  };
}

const ERROR_NAMES = new Set<string>(Object.values(ERROR_RESPONSES));

/** Adds what the route schemas cannot carry to one generated operation. */
function finishOperation(op: Json, authenticated: boolean): void {
  const prose = PROSE[op.operationId as string];
  if (prose) {
    op.summary = prose.summary;
    if (prose.description) op.description = prose.description;
    if (prose.parameters) op.parameters = [...((op.parameters as Json[] | undefined) ?? []), ...prose.parameters];
  }
  const responses = (op.responses ?? {}) as Record<string, Json>;
  for (const [status, res] of Object.entries(responses)) {
    // Error responses point at the shared components (headers, example) named in route schemas.
    if (typeof res.description === 'string' && ERROR_NAMES.has(res.description)) {
      responses[status] = ref('responses', res.description);
      continue;
    }
    if (status !== '200') continue;
    res.headers = { ...(authenticated ? SUCCESS_HEADERS : {}), ...(prose?.headers ?? {}) };
    if (Object.keys(res.headers as Json).length === 0) delete res.headers;
    const json = (res.content as Record<string, Json> | undefined)?.['application/json'];
    if (json && prose?.example !== undefined) json.example = prose.example;
  }
  // The router refuses a path parameter over its length limit before any route runs.
  if (((op.parameters as Json[] | undefined) ?? []).some((p) => p.in === 'path'))
    responses['414'] = ref('responses', 'UriTooLong');
  // Any route answers 400 to an HTTP/1.1 request without a Host header.
  if (!Object.keys(responses).some((k) => k.startsWith('4'))) responses['400'] = ref('responses', 'BadRequest');
  if (op.operationId === 'watchJob') {
    responses['204'] = {
      description:
        'The client reconnected with the `Last-Event-ID` of the terminal state: there is nothing more (a standard EventSource stops).',
      headers: SUCCESS_HEADERS,
    };
  }
  if (op.operationId === 'downloadResult') {
    // The result's own type (the `content_type` of its result link).
    responses['200']!.content = Object.fromEntries(
      ['image/*', 'video/*', 'audio/*', 'application/json', 'application/octet-stream'].map((t) => [t, {}]),
    );
  }
}

/** Parameters rendered from zod: path ones first, without the noise (`$schema`, long regexes next to a format). */
function finishParameters(op: Json): void {
  const params = (op.parameters as Json[] | undefined) ?? [];
  for (const p of params) if (p.schema) p.schema = tidy(p.schema);
  params.sort((a, b) => Number(b.in === 'path') - Number(a.in === 'path'));
}
