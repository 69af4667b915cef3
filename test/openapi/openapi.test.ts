import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPENAPI_PATH } from '../../src/http/routes/docs.js';
import { defaultJobTypes } from '../../src/processors/catalogue.js';
import { startMediaServer, type MediaServer } from '../helpers/media-server.js';
import { startService, type TestService } from '../helpers/service.js';
import { docsOrigin, registeredRoutes, responseChecker, shape, type Json } from './support.js';

let svc: TestService;
let media: MediaServer;
let docs: Awaited<ReturnType<typeof docsOrigin>>;
let doc: Json;

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];
/** Served on purpose without being operations of the API: the viewer's static files. */
const NOT_OPERATIONS = new Set(['GET /docs/{}']);
/** Not the public API: the operator's routes (own auth), the dashboard's static files and the site's icon. */
const PRIVATE = /^[A-Z]+ \/(admin\/api\b|dashboard\b|favicon\.ico$)/;

beforeAll(async () => {
  media = await startMediaServer();
  svc = await startService();
  docs = await docsOrigin(svc);
  const res = await fetch(`${docs.base}${OPENAPI_PATH}`);
  expect(res.status).toBe(200);
  doc = (await res.json()) as Json;
});
afterAll(async () => {
  await docs?.close();
  await svc?.stop();
  await media?.close();
});

/** Every documented operation as "METHOD /shape". */
function documented(): Set<string> {
  const out = new Set<string>();
  for (const [p, item] of Object.entries(doc.paths as Json)) {
    for (const m of METHODS) if (item[m]) out.add(`${m.toUpperCase()} ${shape(p)}`);
  }
  return out;
}

/** What the server registers, with the submit route expanded over the catalogue. */
function served(): Set<string> {
  const out = new Set<string>();
  const types = defaultJobTypes({ threads: 1 }).map((t) => t.name);
  for (const r of registeredRoutes(svc.app.server)) {
    if (r.path === '/api/v1/jobs/submit/:jobType')
      for (const t of types) out.add(`${r.method} /api/v1/jobs/submit/${t}`);
    else out.add(`${r.method} ${shape(r.path)}`);
  }
  return out;
}

describe('the OpenAPI document', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    const validator = new Validator();
    const res = await validator.validate(structuredClone(doc));
    expect(res.errors ?? []).toEqual([]);
    expect(res.valid).toBe(true);
    expect(validator.version).toBe('3.1');
    expect(doc.openapi).toMatch(/^3\.1\./);
  });

  it('has component schemas that are valid JSON Schema 2020-12', () => {
    const checker = responseChecker(doc);
    expect(checker.compileAll()).toBeGreaterThan(15);
  });

  it('is served without an API key, as JSON, not wrapped in the envelope', async () => {
    const res = await fetch(`${docs.base}${OPENAPI_PATH}`, { headers: { authorization: 'Bearer not-a-key' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const body = (await res.json()) as Json;
    expect(body.code).toBeUndefined();
    expect(body.info.title).toBe('media-jobs API');
  });

  it('documents every route the server registers (method and path)', () => {
    const routes = served();
    // The parser of printRoutes found the routes it must (guards against an empty list).
    expect(routes).toContain('GET /api/v1/jobs/{}/status');
    expect(routes).toContain('POST /api/v1/jobs/{}/webhook-deliveries/{}/redeliver');
    const docd = documented();
    const missing = [...routes].filter((r) => !docd.has(r) && !NOT_OPERATIONS.has(r) && !PRIVATE.test(r));
    expect(missing, 'routes the server serves that the document leaves out').toEqual([]);
  });

  it('documents nothing the server does not serve', () => {
    const routes = served();
    const phantom = [...documented()].filter((r) => !routes.has(r));
    expect(phantom, 'documented operations the server does not register (is everything wired in server.ts?)').toEqual(
      [],
    );
  });

  it('has one submit operation per job type, with the body schema that validates submits', async () => {
    const types = defaultJobTypes({ threads: 1 });
    const listed = (await svc.call('GET', '/api/v1/job-types')).body.data.job_types as Json[];
    for (const t of types) {
      const op = doc.paths[`/api/v1/jobs/submit/${t.name}`]?.post;
      expect(op, t.name).toBeDefined();
      const params = op.parameters.map((p: Json) => p.$ref ?? p.name);
      expect(params).toContain('#/components/parameters/Idempotency-Key');
      const ref = op.requestBody.content['application/json'].schema.$ref as string;
      const body = doc.components.schemas[ref.split('/').pop()!];
      expect(body.properties.job_type.const).toBe(t.name);
      expect(body.properties.model.enum).toEqual(t.models.map((m) => m.name));
      // Same source as GET /job-types: the same input schema.
      const discovery = listed.find((j) => j.name === t.name)!;
      expect(body.properties.input).toEqual(stripIds(discovery.body_schema.properties.input));
      for (const status of ['200', '400', '401', '409', '413', '415', '429', '500'])
        expect(Object.keys(op.responses)).toContain(status);
      expect(op.responses['200'].headers).toHaveProperty('Idempotent-Replayed');
      expect(op.responses['200'].headers).toHaveProperty('X-Request-Id');
    }
  });

  it('agrees with the server on which submit bodies are valid', async () => {
    const checker = responseChecker(doc);
    const src = media.url('/small.png');
    const bodies: Json[] = [
      { job_type: 'image-transform', model: 'lanczos3', input: { source: src } },
      { job_type: 'image-transform', model: 'nearest', input: { source: [src], width: 20, format: 'png' } },
      { job_type: 'image-transform', model: 'bicubic', input: { source: src } },
      { job_type: 'image-transform', model: 'lanczos3' },
      { job_type: 'image-transform', model: 'lanczos3', input: { source: src, colour: 'red' } },
      { job_type: 'image-transform', model: 'lanczos3', input: { source: [src, src] } },
      { job_type: 'image-transform', model: 'lanczos3', input: { source: src, width: 0 } },
      {
        job_type: 'image-transform',
        model: 'lanczos3',
        input: { source: src },
        webhook: { url: media.url('/hook'), events: ['job.done'] },
      },
      {
        job_type: 'image-transform',
        model: 'lanczos3',
        input: { source: src },
        webhook: { url: media.url('/hook'), secret: 's', events: ['job.failed'] },
      },
    ];
    for (const body of bodies) {
      const verdict = checker.matches('SubmitImageTransform', body) === true;
      const res = await svc.call('POST', '/api/v1/jobs/submit/image-transform', { body });
      expect([res.status, JSON.stringify(body)]).toEqual([verdict ? 200 : 400, JSON.stringify(body)]);
    }
    // The document's own example is valid too.
    const example =
      doc.paths['/api/v1/jobs/submit/image-transform'].post.requestBody.content['application/json'].example;
    expect(checker.matches('SubmitImageTransform', example)).toBe(true);
  });

  it('documents the envelope, the errors, the headers and bearer security', () => {
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(doc.security).toEqual([{ bearerAuth: [] }]);
    for (const name of [
      'BadRequest',
      'Unauthorized',
      'NotFound',
      'Conflict',
      'Gone',
      'PayloadTooLarge',
      'UnsupportedMediaType',
      'TooManyRequests',
      'InternalError',
    ]) {
      expect(doc.components.responses[name].content['application/json'].schema.$ref).toBe(
        '#/components/schemas/ErrorEnvelope',
      );
    }
    expect(doc.components.responses.TooManyRequests.headers).toHaveProperty('Retry-After');
    expect(doc.components.responses.TooManyRequests.headers).toHaveProperty('RateLimit');
    expect(doc.components.schemas.ErrorEnvelope.properties.code.const).toBe(-1);
    // Routes outside the API key: no security.
    for (const p of [OPENAPI_PATH, '/docs', '/results/{key}', '/healthz', '/readyz', '/metrics'])
      expect(doc.paths[p].get.security, p).toEqual([]);
    const status = doc.paths['/api/v1/jobs/{uuid}/status'].get;
    expect(status.parameters.find((p: Json) => p.name === 'wait').schema).toMatchObject({
      type: 'integer',
      minimum: 0,
      maximum: 60,
    });
    const list = doc.paths['/api/v1/jobs'].get;
    expect(list.parameters.find((p: Json) => p.name === 'limit').schema).toMatchObject({
      minimum: 1,
      maximum: 100,
      default: 20,
    });
    expect(list.parameters.map((p: Json) => p.name).sort()).toEqual(['cursor', 'job_type', 'limit', 'status']);
  });

  it('documents the webhook deliveries as OpenAPI 3.1 webhooks with the X-Service headers', () => {
    expect(Object.keys(doc.webhooks).sort()).toEqual(['job.cancelled', 'job.completed', 'job.failed']);
    for (const w of Object.values<Json>(doc.webhooks)) {
      expect(w.post.parameters.map((p: Json) => p.name)).toEqual([
        'X-Service-Event-Id',
        'X-Service-Timestamp',
        'X-Service-Signature',
      ]);
      expect(w.post.requestBody.content['application/json'].schema.$ref).toBe('#/components/schemas/WebhookPayload');
      expect(
        responseChecker(doc).matches('WebhookPayload', w.post.requestBody.content['application/json'].example),
      ).toBe(true);
      // The schedule and timeout this service was configured with (the test helper shortens them).
      expect(svc.app.config.webhookRetryScheduleMs).toEqual([0, 200, 400, 600, 800]);
      expect(w.post.description).toContain('Attempts: at once, then 200ms, 400ms, 600ms and 800ms after each failure');
      expect(w.post.description).toContain(`${svc.app.config.webhookTimeoutMs / 1000}s timeout`);
    }
    expect(doc.paths['/api/v1/jobs/{uuid}/events'].get.description).toContain(
      'More than 32 open streams per owner answer 429.',
    );
  });
});

describe('GET /docs', () => {
  it('answers an HTML page whose every asset loads from this server', async () => {
    const res = await fetch(`${docs.base}/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    const html = await res.text();
    expect(html).toContain(OPENAPI_PATH);
    const refs = [...html.matchAll(/\b(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(refs.length).toBeGreaterThanOrEqual(4);
    // Nothing from elsewhere: every reference is a path on this server.
    for (const r of refs) expect(r, r).toMatch(/^\/(?!\/)/);
    for (const r of refs) {
      const a = await fetch(`${docs.base}${r}`);
      expect([r, a.status]).toEqual([r, 200]);
      const type = a.headers.get('content-type') ?? '';
      const bytes = Buffer.from(await a.arrayBuffer());
      expect(bytes.length, r).toBeGreaterThan(100);
      if (r.endsWith('.js')) expect(type).toMatch(/javascript/);
      if (r.endsWith('.css')) expect(type).toMatch(/^text\/css/);
      if (r.endsWith('.png')) expect(bytes.subarray(1, 4).toString()).toBe('PNG');
    }
    const init = await (await fetch(`${docs.base}/docs/init.js`)).text();
    expect(init).toContain('SwaggerUIBundle');
    expect(init).toContain('validatorUrl: null');
  });

  it('answers 404 for a file it does not have', async () => {
    for (const p of ['/docs/nope.js', '/docs/..%2Fpackage.json', '/docs/index.html']) {
      const res = await fetch(`${docs.base}${p}`);
      expect([p, res.status]).toEqual([p, 404]);
    }
  });
});

function stripIds(s: unknown): unknown {
  if (Array.isArray(s)) return s.map(stripIds);
  if (s === null || typeof s !== 'object') return s;
  const out: Json = {};
  for (const [k, v] of Object.entries(s)) if (k !== '$schema' && k !== '$id') out[k] = stripIds(v);
  return out;
}
