import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPENAPI_PATH } from '../../src/http/routes/docs.js';
import { defaultJobTypes } from '../../src/processors/catalogue.js';
import { sleepJobType } from '../helpers/job-types.js';
import { startMediaServer, type MediaServer } from '../helpers/media-server.js';
import { startServer, type TestServer } from '../helpers/servers.js';
import { startService, waitFor, waitTerminal, type TestService } from '../helpers/service.js';
import { docsOrigin, responseChecker, type Json } from './support.js';

/**
 * The document tells the truth: real responses of a running service, successes and errors,
 * validate against the schemas the document gives for that operation and status.
 */

let svc: TestService;
let media: MediaServer;
let hooks: TestServer;
const deliveries: Array<{ headers: Record<string, string | string[] | undefined>; body: string }> = [];
let check: ReturnType<typeof responseChecker>['check'];
let checker: ReturnType<typeof responseChecker>;
let doc: Json;

beforeAll(async () => {
  media = await startMediaServer();
  hooks = await startServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      deliveries.push({ headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  svc = await startService({}, { jobTypes: [...defaultJobTypes({ threads: 1 }), sleepJobType()] });
  const docs = await docsOrigin(svc, [...defaultJobTypes({ threads: 1 }), sleepJobType()]);
  doc = (await (await fetch(`${docs.base}${OPENAPI_PATH}`)).json()) as Json;
  await docs.close();
  checker = responseChecker(doc);
  check = (...args) => checker.check(...args);
});
afterAll(async () => {
  await svc?.stop();
  await media?.close();
  await hooks?.close();
});

const SUBMIT = '/api/v1/jobs/submit/image-transform';
const transform = (input: Record<string, unknown>, extra: Json = {}) => ({
  job_type: 'image-transform',
  model: 'lanczos3',
  input,
  ...extra,
});

describe('responses match the document', () => {
  it('submit, status, result, cancel, job types and the list', async () => {
    const sub = await svc.call('POST', SUBMIT, {
      body: transform(
        { source: media.url('/photo.jpg'), width: 64 },
        { webhook: { url: `${hooks.origin}/hook`, secret: 'shh' } },
      ),
      headers: { 'idempotency-key': `contract-${Date.now()}` },
    });
    check('POST', SUBMIT, sub.status, sub.body);
    expect(sub.headers.get('x-request-id')).toBeTruthy();
    const uuid = sub.body.data.uuid as string;

    const st = await svc.call('GET', `/api/v1/jobs/${uuid}/status`);
    check('GET', '/api/v1/jobs/{uuid}/status', st.status, st.body);

    await waitTerminal(svc.call, uuid);
    const waited = await svc.call('GET', `/api/v1/jobs/${uuid}/status?wait=1`);
    check('GET', '/api/v1/jobs/{uuid}/status', waited.status, waited.body);
    expect(waited.body.data.status).toBe('completed');

    const res = await svc.call('GET', `/api/v1/jobs/${uuid}/result`);
    check('GET', '/api/v1/jobs/{uuid}/result', res.status, res.body);

    const types = await svc.call('GET', '/api/v1/job-types');
    check('GET', '/api/v1/job-types', types.status, types.body);

    const list = await svc.call('GET', '/api/v1/jobs?limit=5');
    check('GET', '/api/v1/jobs', list.status, list.body);

    const running = await svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
      body: { job_type: 'test-sleep', model: 'v1', input: { ms: 60_000 } },
    });
    const cancel = await svc.call('POST', `/api/v1/jobs/${running.body.data.uuid}/cancel`);
    check('POST', '/api/v1/jobs/{uuid}/cancel', cancel.status, cancel.body);
  });

  it('webhook deliveries, redelivery and the payload itself', async () => {
    const sub = await svc.call('POST', SUBMIT, {
      body: transform({ source: media.url('/small.png') }, { webhook: { url: `${hooks.origin}/hook`, secret: 'shh' } }),
    });
    const uuid = sub.body.data.uuid as string;
    await waitTerminal(svc.call, uuid);
    const delivery = await waitFor(
      () => deliveries.find((d) => JSON.parse(d.body).job.uuid === uuid),
      'the webhook delivery',
    );
    expect(checker.matches('WebhookPayload', JSON.parse(delivery.body))).toBe(true);
    // The headers the document names.
    const hookOp = doc.webhooks['job.completed'].post;
    for (const p of hookOp.parameters as Json[])
      expect(delivery.headers[p.name.toLowerCase()], p.name).toEqual(expect.any(String));

    const list = await waitFor(async () => {
      const r = await svc.call('GET', `/api/v1/jobs/${uuid}/webhook-deliveries`);
      return r.body.data?.deliveries?.[0]?.state === 'delivered' ? r : undefined;
    }, 'the delivery to be recorded');
    check('GET', '/api/v1/jobs/{uuid}/webhook-deliveries', list.status, list.body);
    const eventId = list.body.data.deliveries[0].event_id as string;
    const again = await svc.call('POST', `/api/v1/jobs/${uuid}/webhook-deliveries/${eventId}/redeliver`);
    check('POST', '/api/v1/jobs/{uuid}/webhook-deliveries/{event_id}/redeliver', again.status, again.body);
  });

  it('errors: 400, 401, 404, 409, 413, 415 and the result download 403', async () => {
    const bad = await svc.call('POST', SUBMIT, {
      body: transform({ source: media.url('/photo.jpg') }, { model: 'bicubic' }),
    });
    expect(bad.status).toBe(400);
    check('POST', SUBMIT, 400, bad.body);

    const noKey = await svc.call('GET', '/api/v1/job-types', { key: null });
    expect(noKey.status).toBe(401);
    check('GET', '/api/v1/job-types', 401, noKey.body);

    const missing = await svc.call('GET', '/api/v1/jobs/00000000-0000-4000-8000-000000000000/status');
    expect(missing.status).toBe(404);
    check('GET', '/api/v1/jobs/{uuid}/status', 404, missing.body);

    const key = `contract-409-${Date.now()}`;
    await svc.call('POST', SUBMIT, {
      body: transform({ source: media.url('/small.png') }),
      headers: { 'idempotency-key': key },
    });
    const conflict = await svc.call('POST', SUBMIT, {
      body: transform({ source: media.url('/photo.jpg') }),
      headers: { 'idempotency-key': key },
    });
    expect(conflict.status).toBe(409);
    check('POST', SUBMIT, 409, conflict.body);

    const big = await svc.call('POST', SUBMIT, { raw: JSON.stringify({ pad: 'x'.repeat(2 * 1024 * 1024) }) });
    expect(big.status).toBe(413);
    check('POST', SUBMIT, 413, big.body);

    const text = await svc.call('POST', SUBMIT, { raw: 'hello', headers: { 'content-type': 'text/plain' } });
    expect(text.status).toBe(415);
    check('POST', SUBMIT, 415, text.body);

    const badWait = await svc.call('GET', '/api/v1/jobs/00000000-0000-4000-8000-000000000000/status?wait=999');
    expect([400, 404]).toContain(badWait.status);
    check('GET', '/api/v1/jobs/{uuid}/status', badWait.status, badWait.body);

    const forged = await fetch(`${svc.base}/results/nothing.png?expires=9999999999&signature=forged`);
    expect(forged.status).toBe(403);
    check('GET', '/results/{key}', 403, await forged.json());
  });

  it('operations endpoints', async () => {
    for (const p of ['/healthz', '/readyz']) {
      const r = await fetch(`${svc.base}${p}`);
      expect(r.status).toBe(200);
      check('GET', p, 200, await r.json());
    }
    const m = await fetch(`${svc.base}/metrics`);
    expect(m.status).toBe(200);
    expect(Object.keys(doc.paths['/metrics'].get.responses['200'].content)).toEqual(['text/plain']);
    expect(m.headers.get('content-type')).toMatch(/^text\/plain/);
  });
});
