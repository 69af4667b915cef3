import { createHmac, timingSafeEqual } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook } from '../../src/index.js';
import { sleepJobType } from '../helpers/job-types.js';
import { startService, waitFor, waitTerminal, type TestService } from '../helpers/service.js';
import { startReceiver, type Receiver } from './receiver.js';

let svc: TestService;
let rx: Receiver;

beforeAll(async () => {
  rx = await startReceiver();
  svc = await startService({}, { jobTypes: [sleepJobType()] });
});
afterAll(async () => {
  await svc?.stop();
  await rx?.close();
});

const SECRET = 'whsec_delivery_test';

async function submit(input: Record<string, unknown>, webhook?: Record<string, unknown>): Promise<string> {
  const res = await svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
    body: { job_type: 'test-sleep', model: 'v1', input, webhook },
  });
  expect(res.status, res.text).toBe(200);
  return res.body.data.uuid;
}

/** Requests the receiver got for one job, by the payload's job uuid. */
const forJob = (uuid: string) => rx.requests.filter((r) => r.json().job.uuid === uuid);
const waitForJob = (uuid: string, n = 1) =>
  waitFor(() => (forJob(uuid).length >= n ? forJob(uuid) : undefined), `${n} deliveries for ${uuid}`);

async function deliveries(uuid: string): Promise<any[]> {
  const res = await svc.call('GET', `/api/v1/jobs/${uuid}/webhook-deliveries`);
  expect(res.status, res.text).toBe(200);
  expect(res.body).toMatchObject({ code: 0, message: 'ok' });
  return res.body.data.deliveries;
}

describe('webhook delivery', () => {
  it('delivers job.completed once, signed, with exactly the documented payload', async () => {
    const url = rx.url('/hooks/completed?x=1');
    const uuid = await submit({ ms: 0 }, { url, secret: SECRET });
    const done = await waitTerminal(svc.call, uuid);
    expect(done.status).toBe('completed');
    const [req] = await waitForJob(uuid);

    expect(req!.method).toBe('POST');
    expect(req!.path).toBe('/hooks/completed?x=1');
    expect(req!.headers['content-type']).toBe('application/json');
    expect(req!.headers['user-agent']).toBe('media-jobs-webhooks/1');
    const eventId = req!.headers['x-service-event-id'] as string;
    const timestamp = req!.headers['x-service-timestamp'] as string;
    const signature = req!.headers['x-service-signature'] as string;
    expect(eventId).toMatch(/^[0-9a-f-]{36}$/);
    expect(timestamp).toMatch(/^\d{10}$/);
    expect(Math.abs(Number(timestamp) - Date.now() / 1000)).toBeLessThan(300);
    expect(signature).toMatch(/^[0-9a-f]{64}$/);

    // Independently of our code: node:crypto over timestamp + "." + the raw bytes received.
    const expected = createHmac('sha256', SECRET).update(`${timestamp}.`).update(req!.raw).digest();
    expect(timingSafeEqual(expected, Buffer.from(signature, 'hex'))).toBe(true);
    // And with the package's own verifier.
    const event = verifyWebhook(req!.raw, req!.headers, SECRET);

    expect(event).toEqual({
      event_id: eventId,
      event_type: 'job.completed',
      occurred_at: done.finished_at,
      job: {
        uuid,
        status: 'completed',
        status_detail: done.status_detail,
        error_message: null,
        error_type: null,
        result_ready: true,
      },
    });
    expect(Object.keys(event)).toEqual(['event_id', 'event_type', 'occurred_at', 'job']);
    expect(Object.keys(event.job)).toEqual([
      'uuid',
      'status',
      'status_detail',
      'error_message',
      'error_type',
      'result_ready',
    ]);

    // Delivered on the first attempt: nothing more is scheduled, and the history says so.
    const ds = await waitFor(async () => {
      const d = await deliveries(uuid);
      return d[0]?.state === 'delivered' ? d : undefined;
    }, 'the delivery to be recorded');
    expect(ds).toHaveLength(1);
    expect(ds[0]).toMatchObject({
      event_id: eventId,
      event_type: 'job.completed',
      url,
      state: 'delivered',
      next_attempt_at: null,
    });
    expect(Date.parse(ds[0].created_at)).toBe(Date.parse(done.finished_at));
    expect(ds[0].attempts).toHaveLength(1);
    expect(ds[0].attempts[0]).toMatchObject({ attempt: 1, http_status: 200, error: null, ok: true, manual: false });
    expect(ds[0].attempts[0].duration_ms).toBeGreaterThanOrEqual(0);
    expect(Date.parse(ds[0].attempts[0].started_at)).toBeGreaterThanOrEqual(Date.parse(done.finished_at));
    expect(forJob(uuid)).toHaveLength(1);
  });

  it('delivers job.failed with the error fields and result_ready false', async () => {
    const uuid = await submit({ fail: 'processing_error' }, { url: rx.url('/hooks/failed'), secret: SECRET });
    const done = await waitTerminal(svc.call, uuid);
    const [req] = await waitForJob(uuid);
    expect(verifyWebhook(req!.raw, req!.headers, SECRET)).toMatchObject({
      event_type: 'job.failed',
      occurred_at: done.finished_at,
      job: {
        uuid,
        status: 'failed',
        status_detail: done.status_detail,
        error_type: 'processing_error',
        error_message: 'the test processor failed on purpose',
        result_ready: false,
      },
    });
  });

  it('delivers job.cancelled when a job is cancelled', async () => {
    const uuid = await submit({ ms: 60_000 }, { url: rx.url('/hooks/cancelled'), secret: SECRET });
    const c = await svc.call('POST', `/api/v1/jobs/${uuid}/cancel`);
    expect(c.status).toBe(200);
    const [req] = await waitForJob(uuid);
    expect(verifyWebhook(req!.raw, req!.headers, SECRET)).toMatchObject({
      event_type: 'job.cancelled',
      job: { uuid, status: 'cancelled', result_ready: false, error_type: null },
    });
  });

  it('sends no signature header without a secret', async () => {
    const uuid = await submit({ ms: 0 }, { url: rx.url('/hooks/unsigned') });
    const [req] = await waitForJob(uuid);
    expect(req!.headers['x-service-signature']).toBeUndefined();
    expect(req!.headers['x-service-event-id']).toBe(req!.json().event_id);
    expect(req!.headers['x-service-timestamp']).toMatch(/^\d+$/);
    expect(req!.json()).toMatchObject({ event_type: 'job.completed', job: { uuid, status: 'completed' } });
  });

  it('respects webhook.events: a job subscribed to job.failed only sends nothing when it completes', async () => {
    const quiet = await submit({ ms: 0 }, { url: rx.url('/hooks/filtered'), events: ['job.failed'] });
    expect((await waitTerminal(svc.call, quiet)).status).toBe('completed');
    // The event would have been written with the terminal state: there is none.
    expect(await deliveries(quiet)).toEqual([]);
    // A later subscribed event to the same receiver arrives; the filtered one never did.
    const loud = await submit({ fail: 'processing_error' }, { url: rx.url('/hooks/filtered'), events: ['job.failed'] });
    await waitForJob(loud);
    expect(forJob(quiet)).toHaveLength(0);
    expect((await deliveries(loud))[0]).toMatchObject({ event_type: 'job.failed' });
  });

  it('never sends intermediate states: exactly one delivery per job, for its terminal state', async () => {
    const uuids = await Promise.all([
      submit({ ms: 50 }, { url: rx.url('/hooks/many') }),
      submit({ ms: 10 }, { url: rx.url('/hooks/many') }),
    ]);
    for (const uuid of uuids) {
      await waitTerminal(svc.call, uuid);
      const ds = await waitFor(async () => {
        const d = await deliveries(uuid);
        return d[0]?.state === 'delivered' ? d : undefined;
      }, 'delivered');
      expect(ds).toHaveLength(1);
      expect(forJob(uuid).map((r) => r.json().job.status)).toEqual(['completed']);
    }
  });

  it('lists no deliveries for a job without a webhook', async () => {
    const uuid = await submit({ ms: 0 });
    await waitTerminal(svc.call, uuid);
    expect(await deliveries(uuid)).toEqual([]);
  });
});
