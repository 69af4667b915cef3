import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type TestService } from '../helpers/service.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService({ MAX_BODY_BYTES: '4096', WORKER_CONCURRENCY: '0' });
});
afterAll(() => svc?.stop());

const body = { job_type: 'image-transform', model: 'lanczos3', input: { source: 'http://127.0.0.1:9/x.jpg' } };

describe('envelope, status codes and headers', () => {
  it('wraps unknown routes and wrong methods in the envelope', async () => {
    const a = await svc.call('GET', '/api/v1/nothing-here');
    expect(a.status).toBe(404);
    expect(a.body).toEqual({ code: -1, message: 'no route GET /api/v1/nothing-here', data: {} });
    const b = await svc.call('DELETE', '/api/v1/jobs/submit/image-transform');
    expect(b.status).toBe(405);
    expect(b.headers.get('allow')).toBe('POST');
    expect(b.body.code).toBe(-1);
    expect(b.body.data).toEqual({});
  });

  it('sends X-Request-Id on every response, echoing a sane one', async () => {
    const mine = await svc.call('GET', '/api/v1/job-types', { headers: { 'x-request-id': 'trace-123' } });
    expect(mine.headers.get('x-request-id')).toBe('trace-123');
    const bad = await svc.call('GET', '/api/v1/job-types', { headers: { 'x-request-id': 'bad id with spaces' } });
    expect(bad.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    for (const r of [
      await svc.call('GET', '/nope', { key: null }),
      await svc.call('POST', '/api/v1/jobs/submit/image-transform', { key: null }),
      await svc.call('POST', '/api/v1/jobs/00000000-0000-4000-8000-000000000000/cancel'),
    ]) {
      expect(r.headers.get('x-request-id')).toBeTruthy();
    }
  });

  it('never sets a cookie and ignores one', async () => {
    const r = await svc.call('POST', '/api/v1/jobs/submit/image-transform', {
      body,
      headers: { cookie: 'session=abc' },
    });
    expect(r.status).toBe(200);
    expect(r.headers.get('set-cookie')).toBeNull();
    const noKey = await svc.call('GET', '/api/v1/job-types', { key: null, headers: { cookie: 'session=abc' } });
    expect(noKey.status).toBe(401);
  });
});

describe('authentication', () => {
  it.each([
    ['missing', undefined, /missing Authorization header/],
    ['not Bearer', 'Basic dXNlcjpwYXNz', /malformed Authorization header/],
    ['empty Bearer', 'Bearer ', /malformed Authorization header/],
    ['unknown key', 'Bearer mj_thisisnotakey', /invalid or revoked API key/],
  ])('answers 401 for a %s key on every route', async (_name, header, message) => {
    const headers: Record<string, string> = header ? { authorization: header } : {};
    for (const [method, path] of [
      ['POST', '/api/v1/jobs/submit/image-transform'],
      ['GET', '/api/v1/jobs/00000000-0000-4000-8000-000000000000/status'],
      ['POST', '/api/v1/jobs/00000000-0000-4000-8000-000000000000/cancel'],
      ['GET', '/api/v1/jobs/00000000-0000-4000-8000-000000000000/result'],
      ['GET', '/api/v1/job-types'],
    ] as const) {
      const r = await svc.call(method, path, { key: null, headers, body: method === 'POST' ? body : undefined });
      expect(r.status, `${method} ${path}`).toBe(401);
      expect(r.body.code).toBe(-1);
      expect(r.body.message).toMatch(message);
      expect(r.headers.get('www-authenticate')).toMatch(/^Bearer/);
    }
  });
});

describe('request bodies', () => {
  it('rejects malformed JSON with 400', async () => {
    const r = await svc.call('POST', '/api/v1/jobs/submit/image-transform', { raw: '{"job_type":' });
    expect(r.status).toBe(400);
    expect(r.body).toEqual({ code: -1, message: 'body is not valid JSON', data: {} });
  });

  it.each([['[]'], ['"text"'], ['42'], ['null'], ['']])('rejects the non-object body %s with 400', async (raw) => {
    const r = await svc.call('POST', '/api/v1/jobs/submit/image-transform', { raw });
    expect(r.status).toBe(400);
    expect(r.body.message).toBe('body must be a JSON object');
  });

  it('rejects a non-JSON content type with 415', async () => {
    const r = await svc.call('POST', '/api/v1/jobs/submit/image-transform', {
      raw: JSON.stringify(body),
      headers: { 'content-type': 'text/plain' },
    });
    expect(r.status).toBe(415);
    expect(r.body).toEqual({ code: -1, message: 'Content-Type must be application/json', data: {} });
  });

  it('rejects a compressed body with 415 instead of reading it as plain JSON', async () => {
    const r = await svc.call('POST', '/api/v1/jobs/submit/image-transform', {
      raw: JSON.stringify(body),
      headers: { 'content-encoding': 'gzip' },
    });
    expect(r.status).toBe(415);
    expect(r.body.message).toBe('Content-Encoding gzip is not supported; send the body uncompressed');
    const plain = await svc.call('POST', '/api/v1/jobs/submit/image-transform', {
      raw: JSON.stringify(body),
      headers: { 'content-encoding': 'identity' },
    });
    expect(plain.status).toBe(200);
  });

  it('rejects a body over the limit with 413', async () => {
    const big = { ...body, input: { ...body.input, padding: 'x'.repeat(5000) } };
    const r = await svc.call('POST', '/api/v1/jobs/submit/image-transform', { body: big });
    expect(r.status).toBe(413);
    expect(r.body.message).toBe('body is larger than 4096 bytes');
  });

  it('accepts cancel with no body or {}', async () => {
    const a = (await svc.call('POST', '/api/v1/jobs/submit/image-transform', { body })).body.data.uuid;
    const b = (await svc.call('POST', '/api/v1/jobs/submit/image-transform', { body })).body.data.uuid;
    expect((await svc.call('POST', `/api/v1/jobs/${a}/cancel`)).status).toBe(200);
    expect((await svc.call('POST', `/api/v1/jobs/${b}/cancel`, { body: {} })).status).toBe(200);
  });
});

describe('discovery', () => {
  it('lists job types with slots, models and JSON Schema options from the catalogue', async () => {
    const r = await svc.call('GET', '/api/v1/job-types');
    expect(r.status).toBe(200);
    const t = r.body.data.job_types.find((x: any) => x.name === 'image-transform');
    expect(t.slots.source).toMatchObject({ required: true, min: 1, max: 1, accepts: 'image' });
    expect(t.models.map((m: any) => m.name)).toEqual(['lanczos3', 'mitchell', 'nearest']);
    expect(t.options.properties.format.enum).toEqual(['jpeg', 'png', 'webp', 'avif']);
    expect(t.options.properties.quality).toMatchObject({ minimum: 1, maximum: 100, default: 80 });
    expect(t.options.additionalProperties).toBe(false);
    expect(t.body_schema.properties.input.properties.source.anyOf).toHaveLength(2);
  });
});
