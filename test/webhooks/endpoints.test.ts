import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook } from '../../src/index.js';
import { sleepJobType } from '../helpers/job-types.js';
import { startService, waitFor, waitTerminal, type TestService } from '../helpers/service.js';
import { startReceiver, type Received, type Receiver } from './receiver.js';

/**
 * Owner endpoints over real HTTP with a real receiver: Standard Webhooks signatures checked by
 * the npm `standardwebhooks` package, rotation, 410 and sustained failures, enable and recover.
 */
let svc: TestService;
let rx: Receiver;

beforeAll(async () => {
  rx = await startReceiver();
  svc = await startService({ WEBHOOK_DISABLE_AFTER: '1s' }, { jobTypes: [sleepJobType()] });
});
afterAll(async () => {
  await svc?.stop();
  await rx?.close();
});

async function createEndpoint(body: Record<string, unknown>, key?: string): Promise<any> {
  const res = await svc.call('POST', '/api/v1/webhook-endpoints', { body, key });
  expect(res.status, res.text).toBe(201);
  return res.body.data;
}

async function submit(input: Record<string, unknown>, webhook?: Record<string, unknown>): Promise<string> {
  const res = await svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
    body: { job_type: 'test-sleep', model: 'v1', input, webhook },
  });
  expect(res.status, res.text).toBe(200);
  return res.body.data.uuid;
}

const at = (path: string) => rx.requests.filter((r) => r.path === path);
const forJob = (path: string, uuid: string) => at(path).filter((r) => r.json().job.uuid === uuid);
const headers = (r: Received) => r.headers as Record<string, string>;

async function endpoint(id: string): Promise<any> {
  const res = await svc.call('GET', `/api/v1/webhook-endpoints/${id}`);
  expect(res.status, res.text).toBe(200);
  return res.body.data;
}

async function log(id: string): Promise<any[]> {
  const res = await svc.call('GET', `/api/v1/webhook-endpoints/${id}/deliveries`);
  expect(res.status, res.text).toBe(200);
  return res.body.data.deliveries;
}

describe('owner webhook endpoints', () => {
  it('creates, lists, changes and deletes endpoints; another owner gets 404', async () => {
    const ep = await createEndpoint({ url: rx.url('/crud'), description: 'mine' });
    expect(ep).toMatchObject({
      url: rx.url('/crud'),
      events: ['job.completed', 'job.failed', 'job.cancelled'],
      description: 'mine',
      status: 'enabled',
      disabled_reason: null,
    });
    expect(ep.id).toMatch(/^ep_/);
    expect(ep.secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);

    const list = await svc.call('GET', '/api/v1/webhook-endpoints');
    expect(list.body.data.endpoints.map((e: any) => e.id)).toContain(ep.id);
    const patched = await svc.call('PATCH', `/api/v1/webhook-endpoints/${ep.id}`, { body: { events: ['job.failed'] } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.data.events).toEqual(['job.failed']);

    const bob = await svc.newKey('bob');
    for (const [method, path] of [
      ['GET', ''],
      ['PATCH', ''],
      ['DELETE', ''],
      ['POST', '/rotate-secret'],
      ['POST', '/enable'],
      ['GET', '/deliveries'],
    ] as const) {
      const body = method === 'PATCH' ? { description: 'x' } : undefined;
      const res = await svc.call(method, `/api/v1/webhook-endpoints/${ep.id}${path}`, { key: bob, body });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body).toEqual({ code: -1, message: 'webhook endpoint not found', data: {} });
    }
    const bobs = await svc.call('GET', '/api/v1/webhook-endpoints', { key: bob });
    expect(bobs.body.data.endpoints).toEqual([]);

    const del = await svc.call('DELETE', `/api/v1/webhook-endpoints/${ep.id}`);
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ code: 0, message: 'ok', data: {} });
    expect((await svc.call('GET', `/api/v1/webhook-endpoints/${ep.id}`)).status).toBe(404);
  });

  it('refuses bad bodies with a 400 naming the field, and private-network URLs', async () => {
    const cases: Array<[unknown, RegExp]> = [
      [{}, /url/],
      [{ url: 'ftp://example.com/x' }, /^url: must be a public http or https URL/],
      [{ url: 'http://169.254.169.254/latest' }, /^url: must be a public http or https URL/],
      [{ url: rx.url('/x'), events: ['job.queued'] }, /events/],
      [{ url: rx.url('/x'), extra: 1 }, /extra/],
    ];
    for (const [body, message] of cases) {
      const res = await svc.call('POST', '/api/v1/webhook-endpoints', { body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.message).toMatch(message);
    }
    // With the address rule on (the default), a private address is refused too.
    const strict = await startService({ MEDIA_ALLOW_PRIVATE_NETWORKS: 'false' }, { jobTypes: [sleepJobType()] });
    try {
      for (const url of ['http://10.0.0.5/hook', rx.url('/x')]) {
        const res = await strict.call('POST', '/api/v1/webhook-endpoints', { body: { url } });
        expect(res.status, url).toBe(400);
        expect(res.body.message).toMatch(/^url: must be a public http or https URL \(host is a private address\)/);
      }
    } finally {
      await strict.stop();
    }
    const recover = await createEndpoint({ url: rx.url('/bad-recover') });
    const res = await svc.call('POST', `/api/v1/webhook-endpoints/${recover.id}/recover`, {
      body: { since: 'yesterday' },
    });
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/^since/);
  });

  it("delivers each subscribed event of every job exactly once, beside the job's own webhook", async () => {
    const ep = await createEndpoint({ url: rx.url('/fanout'), events: ['job.completed', 'job.failed'] });
    const completed = await submit({ ms: 0 }, { url: rx.url('/own'), secret: 'plain secret' });
    const failed = await submit({ ms: 0, fail: 'processing_error' });
    const cancelled = await submit({ ms: 60_000 });
    const cancel = await svc.call('POST', `/api/v1/jobs/${cancelled}/cancel`);
    expect(cancel.status, cancel.text).toBe(200);
    for (const uuid of [completed, failed]) await waitTerminal(svc.call, uuid);

    await waitFor(() => forJob('/fanout', completed).length >= 1 && forJob('/fanout', failed).length >= 1, 'fan-out');
    await waitFor(() => forJob('/own', completed).length >= 1, "the job's own webhook");
    // Every row delivered (so no retry can come later), then exactly one request each.
    await waitFor(
      async () => (await log(ep.id)).every((d) => d.state === 'delivered') && (await log(ep.id)).length === 2,
    );
    expect(forJob('/fanout', completed)).toHaveLength(1);
    expect(forJob('/fanout', failed)).toHaveLength(1);
    expect(forJob('/fanout', cancelled)).toHaveLength(0);
    expect(forJob('/own', completed)).toHaveLength(1);

    const wh = new Webhook(ep.secret);
    for (const req of [...forJob('/fanout', completed), ...forJob('/fanout', failed)]) {
      const h = headers(req);
      expect(wh.verify(req.raw.toString('utf8'), h)).toEqual(req.json());
      expect(h['webhook-id']).toBe(req.json().event_id);
      expect(h['webhook-timestamp']).toBe(h['x-service-timestamp']);
      // The seed's signature, keyed by the whole secret string.
      const hex = createHmac('sha256', ep.secret).update(`${h['x-service-timestamp']}.`).update(req.raw).digest('hex');
      expect(h['x-service-signature']).toBe(hex);
      expect(verifyWebhook(req.raw, h, ep.secret).event_id).toBe(req.json().event_id);
    }
    // The job's own webhook with a plain secret: Standard Webhooks given base64(secret), too.
    const [own] = forJob('/own', completed);
    expect(
      new Webhook(Buffer.from('plain secret').toString('base64')).verify(own!.raw.toString('utf8'), headers(own!)),
    ).toMatchObject({ event_type: 'job.completed' });
    const types = (await log(ep.id)).map((d) => [d.job_uuid, d.event_type]);
    expect(types).toEqual(
      expect.arrayContaining([
        [completed, 'job.completed'],
        [failed, 'job.failed'],
      ]),
    );
    // The job's delivery list shows its own webhook only.
    const own2 = await svc.call('GET', `/api/v1/jobs/${completed}/webhook-deliveries`);
    expect(own2.body.data.deliveries.map((d: any) => d.url)).toEqual([rx.url('/own')]);
  });

  it('signs with the old and the new secret after a rotation', async () => {
    const ep = await createEndpoint({ url: rx.url('/rotate'), events: ['job.completed'] });
    const rotated = await svc.call('POST', `/api/v1/webhook-endpoints/${ep.id}/rotate-secret`);
    expect(rotated.status, rotated.text).toBe(200);
    const secret = rotated.body.data.secret as string;
    expect(secret).toMatch(/^whsec_/);
    expect(secret).not.toBe(ep.secret);
    expect((await endpoint(ep.id)).secret).toBe(secret);

    const uuid = await submit({ ms: 0 });
    const [req] = await waitFor(() => (forJob('/rotate', uuid).length > 0 ? forJob('/rotate', uuid) : undefined));
    const h = headers(req!);
    expect(h['webhook-signature']!.split(' ')).toHaveLength(2);
    for (const s of [secret, ep.secret]) expect(new Webhook(s).verify(req!.raw, h)).toEqual(req!.json());
    expect(verifyWebhook(req!.raw, h, secret).job.uuid).toBe(uuid);
    // X-Service-Signature carries the new secret only; the Standard header still verifies the old.
    const { 'x-service-signature': _, ...standardOnly } = h;
    expect(verifyWebhook(req!.raw, standardOnly, ep.secret).job.uuid).toBe(uuid);
    expect(() => verifyWebhook(req!.raw, { ...h, 'webhook-signature': 'v1,AAAA' }, ep.secret)).toThrow(/signature/);
  });

  it('a 410 disables at once; enable and recover send each missed delivery once', async () => {
    const path = '/gone';
    const since = new Date(Date.now() - 1000).toISOString();
    let answer = 410;
    const previous = rx.respond;
    rx.respond = (r, n) => (r.path === path ? answer : previous(r, n));
    try {
      const ep = await createEndpoint({ url: rx.url(path), events: ['job.completed'] });
      const first = await submit({ ms: 0 });
      await waitFor(async () => ((await endpoint(ep.id)).status === 'disabled' ? true : undefined), 'disabled');
      const off = await endpoint(ep.id);
      expect(off.disabled_reason).toMatch(/410/);
      expect(forJob(path, first)).toHaveLength(1);
      const metrics = await svc.call('GET', '/metrics', { key: null });
      expect(metrics.text).toMatch(/media_jobs_webhook_endpoints_disabled_total\{reason="gone"\} [1-9]/);
      // The 410 attempt itself, counted by outcome (added to the metric when its batch is written).
      expect(metrics.text).toMatch(/media_jobs_webhook_attempts_total\{outcome="http_error"\} [1-9]/);

      // While disabled: recorded as skipped, never sent.
      const second = await submit({ ms: 0 });
      await waitTerminal(svc.call, second);
      await waitFor(async () => (await log(ep.id)).length === 2, 'two log entries');
      expect((await log(ep.id)).map((d) => d.state).sort()).toEqual(['failed', 'skipped']);
      expect(forJob(path, second)).toHaveLength(0);

      answer = 200;
      const enabled = await svc.call('POST', `/api/v1/webhook-endpoints/${ep.id}/enable`);
      expect(enabled.body.data).toMatchObject({ status: 'enabled', disabled_reason: null });
      const rec = await svc.call('POST', `/api/v1/webhook-endpoints/${ep.id}/recover`, { body: { since } });
      expect(rec.status, rec.text).toBe(200);
      expect(rec.body.data).toEqual({ count: 2 });
      await waitFor(async () => (await log(ep.id)).every((d) => d.state === 'delivered'), 'recovered');
      const again = await svc.call('POST', `/api/v1/webhook-endpoints/${ep.id}/recover`, { body: { since } });
      expect(again.body.data).toEqual({ count: 0 });
      expect(forJob(path, first)).toHaveLength(2); // the 410, then the recovery
      expect(forJob(path, second)).toHaveLength(1);
    } finally {
      rx.respond = previous;
    }
  });

  it('disables an endpoint whose attempts have all failed for WEBHOOK_DISABLE_AFTER', async () => {
    const path = '/failing';
    const previous = rx.respond;
    rx.respond = (r, n) => (r.path === path ? 503 : previous(r, n));
    try {
      const ep = await createEndpoint({ url: rx.url(path), events: ['job.completed'] });
      const uuid = await submit({ ms: 0 });
      await waitFor(async () => ((await endpoint(ep.id)).status === 'disabled' ? true : undefined), 'disabled');
      expect((await endpoint(ep.id)).disabled_reason).toMatch(/^every attempt failed since /);
      const [d] = await log(ep.id);
      expect(d.job_uuid).toBe(uuid);
      expect(d.state).toBe('skipped');
      // Several attempts, and disabled once the first failure was at least the configured second old.
      expect(d.attempts.length).toBeGreaterThan(1);
      const first = Date.parse(d.attempts[0].started_at);
      expect(Date.parse((await endpoint(ep.id)).disabled_at) - first).toBeGreaterThanOrEqual(1000);
    } finally {
      rx.respond = previous;
    }
  });
});
