import Fastify, { type FastifyInstance } from 'fastify';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { ApiError } from '../../src/http/api-error.js';
import { fail } from '../../src/http/envelope.js';
import { docsRoutes, OPENAPI_PATH } from '../../src/http/routes/docs.js';
import { Catalogue, defaultJobTypes } from '../../src/processors/catalogue.js';
import type { JobType } from '../../src/processors/types.js';
import type { TestService } from '../helpers/service.js';

// ajv-formats is CommonJS with a default export.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

export type Json = Record<string, any>;

/**
 * The origin serving /docs and /api/v1/openapi.json: the service itself once server.ts registers
 * docsRoutes, else a small stand-in server with the same routes (until the wiring lands).
 */
export async function docsOrigin(
  svc: TestService,
  jobTypes?: JobType[],
): Promise<{ base: string; wired: boolean; close(): Promise<void> }> {
  if (svc.app.server.hasRoute({ method: 'GET', url: OPENAPI_PATH }))
    return { base: svc.base, wired: true, close: async () => {} };
  const f: FastifyInstance = Fastify();
  f.setErrorHandler((err, _req, reply) => {
    const status = err instanceof ApiError ? err.statusCode : 500;
    return reply.code(status).send(fail((err as Error).message));
  });
  const catalogue = new Catalogue(jobTypes ?? defaultJobTypes({ threads: 1 }));
  const { config } = svc.app;
  docsRoutes(f, {
    catalogue,
    allowPrivate: true,
    webhookRetryScheduleMs: config.webhookRetryScheduleMs,
    webhookTimeoutMs: config.webhookTimeoutMs,
    maxStreamsPerOwner: 32,
  });
  await f.listen({ host: '127.0.0.1', port: 0 });
  const port = (f.server.address() as { port: number }).port;
  return { base: `http://127.0.0.1:${port}`, wired: false, close: () => f.close() };
}

/** Every (method, path) a Fastify app serves, from printRoutes' tree; HEAD twins of GET left out. */
export function registeredRoutes(app: FastifyInstance): Array<{ method: string; path: string }> {
  const out: Array<{ method: string; path: string }> = [];
  const stack: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const m = /^((?:│ {3}| {4})*)(?:├── |└── )(.*?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (!m) continue;
    const depth = m[1]!.length / 4;
    stack.length = depth;
    const full = (stack[depth - 1] ?? '') + m[2]!;
    stack[depth] = full;
    for (const method of m[3]?.split(', ') ?? []) if (method !== 'HEAD') out.push({ method, path: full });
  }
  return out;
}

/** `/api/v1/jobs/:uuid/status` and `/api/v1/jobs/{uuid}/status` both become `/api/v1/jobs/{}/status`. */
export const shape = (path: string) => path.replace(/:[^/]+|\{[^}]+\}/g, '{}');

/**
 * Validates live response bodies against the document's response schemas (JSON Schema 2020-12,
 * formats checked): the contract test that the document tells the truth.
 */
export function responseChecker(doc: Json) {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  const defs = JSON.parse(
    JSON.stringify(doc.components.schemas).replaceAll('#/components/schemas/', 'urn:media-jobs:components#/$defs/'),
  );
  ajv.addSchema({ $id: 'urn:media-jobs:components', $defs: defs });
  const cache = new Map<string, ValidateFunction>();

  const deref = (o: Json | undefined): Json | undefined => {
    if (o && typeof o.$ref === 'string') {
      const [, kind, name] = /^#\/components\/(\w+)\/(.+)$/.exec(o.$ref)!;
      return doc.components[kind!][name!];
    }
    return o;
  };

  /** The schema for (method, path, status), or throws when the document has none. */
  function validatorFor(method: string, path: string, status: number): ValidateFunction {
    const id = `${method} ${path} ${status}`;
    let v = cache.get(id);
    if (v) return v;
    const op = doc.paths[path]?.[method.toLowerCase()];
    if (!op) throw new Error(`the document has no operation ${method} ${path}`);
    const res = deref(op.responses[String(status)]);
    if (!res)
      throw new Error(
        `${method} ${path} documents no ${status} response (has ${Object.keys(op.responses).join(', ')})`,
      );
    const schema = res.content?.['application/json']?.schema;
    if (!schema) throw new Error(`${method} ${path} ${status} has no JSON schema`);
    const rewritten = JSON.parse(
      JSON.stringify(schema).replaceAll('#/components/schemas/', 'urn:media-jobs:components#/$defs/'),
    );
    v = ajv.compile(rewritten);
    cache.set(id, v);
    return v;
  }

  return {
    /** Throws with ajv's errors unless `body` matches the documented response. */
    check(method: string, path: string, status: number, body: unknown): void {
      const v = validatorFor(method, path, status);
      if (!v(body)) {
        throw new Error(
          `${method} ${path} ${status} does not match the document: ${ajv.errorsText(v.errors)}\n${JSON.stringify(body)}`,
        );
      }
    },
    /** Compiles every component schema (they must be valid JSON Schema 2020-12). */
    compileAll(): number {
      let n = 0;
      for (const name of Object.keys(defs)) {
        if (!ajv.getSchema(`urn:media-jobs:components#/$defs/${name}`))
          ajv.compile({ $ref: `urn:media-jobs:components#/$defs/${name}` });
        n++;
      }
      return n;
    },
    /** Validates a value against a named component schema. */
    matches(name: string, value: unknown): string | true {
      const v = ajv.getSchema(`urn:media-jobs:components#/$defs/${name}`)!;
      return v(value) ? true : ajv.errorsText(v.errors);
    },
  };
}
