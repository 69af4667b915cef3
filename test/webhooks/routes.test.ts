import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook } from '../../src/index.js';
import { sleepJobType } from '../helpers/job-types.js';
import { startService, waitFor, waitTerminal, type TestService } from '../helpers/service.js';
import { startReceiver, type Receiver } from './receiver.js';

const SECRET = 'whsec_routes_test';
let svc: TestService;
let rx: Receiver;
/** Answer for the receiver, switchable per test. */
let answer = 200;

beforeAll(async () => {
  rx = await startReceiver(() => answer);
  svc = await startService({}, { jobTypes: [sleepJobType()] });
});
afterAll(async () => {
  await svc?.stop();
  await rx?.close();
});

async function submit(s: TestService, webhook?: Record<string, unknown>, key?: string): Promise<string> {
  const res = await s.call('POST', '/api/v1/jobs/submit/test-sleep', {
    body: { job_type: 'test-sleep', model: 'v1', input: { ms: 0 }, webhook },
    ...(key ? { key } : {}),
  });
  expect(res.status, res.text).toBe(200);
  return res.body.data.uuid;
}

async function deliveryIn(s: TestService, uuid: string, state: string, key?: string): Promise<any> {
  return waitFor(async () => {
    const d = (await s.call('GET', `/api/v1/jobs/${uuid}/webhook-deliveries`, key ? { key } : {})).body.data
      ?.deliveries?.[0];
    return d?.state === state ? d : undefined;
  }, `delivery of ${uuid} to be ${state}`);
}

const forEvent = (r: Receiver, eventId: string) =>
  r.requests.filter((q) => q.headers['x-service-event-id'] === eventId);

describe('POST /jobs/{uuid}/webhook-deliveries/{event_id}/redeliver', () => {
  it('sends the same event id and bytes again, recorded as a manual attempt', async () => {
    answer = 200;
    const uuid = await submit(svc, { url: rx.url('/redeliver'), secret: SECRET });
    const d = await deliveryIn(svc, uuid, 'delivered');
    const res = await svc.call('POST', `/api/v1/jobs/${uuid}/webhook-deliveries/${d.event_id}/redeliver`);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('x-request-id')).toBeTruthy();
    expect(res.body).toMatchObject({ code: 0, message: 'ok' });
    expect(res.body.data).toMatchObject({
      event_id: d.event_id,
      event_type: 'job.completed',
      state: 'delivered',
      next_attempt_at: null,
    });
    expect(res.body.data.attempts.map((a: any) => [a.attempt, a.http_status, a.ok, a.manual])).toEqual([
      [1, 200, true, false],
      [2, 200, true, true],
    ]);

    const reqs = forEvent(rx, d.event_id);
    expect(reqs).toHaveLength(2);
    expect(reqs[1]!.raw.equals(reqs[0]!.raw)).toBe(true);
    for (const r of reqs) expect(verifyWebhook(r.raw, r.headers, SECRET).event_id).toBe(d.event_id);

    const listed = (await svc.call('GET', `/api/v1/jobs/${uuid}/webhook-deliveries`)).body.data.deliveries;
    expect(listed).toEqual([res.body.data]);
  });

  it('turns a failed delivery into a delivered one when the redelivery succeeds', async () => {
    answer = 500;
    const uuid = await submit(svc, { url: rx.url('/recover') });
    const failed = await deliveryIn(svc, uuid, 'failed');
    expect(failed.attempts).toHaveLength(5);

    // Still failing: recorded, state unchanged.
    let res = await svc.call('POST', `/api/v1/jobs/${uuid}/webhook-deliveries/${failed.event_id}/redeliver`);
    expect(res.status).toBe(200);
    expect(res.body.data.state).toBe('failed');
    expect(res.body.data.attempts.at(-1)).toMatchObject({ attempt: 6, http_status: 500, ok: false, manual: true });

    answer = 200;
    res = await svc.call('POST', `/api/v1/jobs/${uuid}/webhook-deliveries/${failed.event_id}/redeliver`);
    expect(res.body.data.state).toBe('delivered');
    expect(res.body.data.attempts.at(-1)).toMatchObject({ attempt: 7, http_status: 200, ok: true, manual: true });
    const reqs = forEvent(rx, failed.event_id);
    expect(reqs).toHaveLength(7);
    expect(reqs.every((r) => r.raw.equals(reqs[0]!.raw))).toBe(true);
  });
});

describe('redelivery of a pending delivery (long schedule)', () => {
  let slow: TestService;
  beforeAll(async () => {
    slow = await startService({ WEBHOOK_RETRY_SCHEDULE: '0,1h,1h' }, { jobTypes: [sleepJobType()] });
  });
  afterAll(async () => {
    await slow?.stop();
  });

  it('runs now without disturbing the schedule; a success ends the delivery', async () => {
    answer = 500;
    const uuid = await submit(slow, { url: rx.url('/pending') });
    const pending = await waitFor(async () => {
      const d = (await slow.call('GET', `/api/v1/jobs/${uuid}/webhook-deliveries`)).body.data.deliveries[0];
      return d?.attempts.length === 1 ? d : undefined;
    }, 'the first attempt to fail');
    expect(pending.state).toBe('pending');
    const firstFailed = Date.parse(pending.attempts[0].started_at);
    expect(Date.parse(pending.next_attempt_at)).toBeGreaterThanOrEqual(firstFailed + 3600_000);

    let res = await slow.call('POST', `/api/v1/jobs/${uuid}/webhook-deliveries/${pending.event_id}/redeliver`);
    expect(res.body.data).toMatchObject({ state: 'pending', next_attempt_at: pending.next_attempt_at });
    expect(res.body.data.attempts.map((a: any) => [a.http_status, a.manual])).toEqual([
      [500, false],
      [500, true],
    ]);

    answer = 200;
    res = await slow.call('POST', `/api/v1/jobs/${uuid}/webhook-deliveries/${pending.event_id}/redeliver`);
    expect(res.body.data).toMatchObject({ state: 'delivered', next_attempt_at: null });
    expect(res.body.data.attempts).toHaveLength(3);
  });
});

describe('owner isolation', () => {
  let aliceJob: string;
  let aliceEvent: string;
  let bobKey: string;
  let bobJob: string;
  let bobEvent: string;

  beforeAll(async () => {
    answer = 200;
    bobKey = await svc.newKey('bob');
    aliceJob = await submit(svc, { url: rx.url('/alice') });
    bobJob = await submit(svc, { url: rx.url('/bob') }, bobKey);
    aliceEvent = (await deliveryIn(svc, aliceJob, 'delivered')).event_id;
    bobEvent = (await deliveryIn(svc, bobJob, 'delivered', bobKey)).event_id;
  });

  const missingJob = '00000000-0000-4000-8000-000000000000';
  const missingEvent = '11111111-1111-4111-8111-111111111111';

  it("answers another owner's job exactly like a missing one on both routes", async () => {
    const theirs = await svc.call('GET', `/api/v1/jobs/${aliceJob}/webhook-deliveries`, { key: bobKey });
    const missing = await svc.call('GET', `/api/v1/jobs/${missingJob}/webhook-deliveries`, { key: bobKey });
    const malformed = await svc.call('GET', `/api/v1/jobs/not-a-uuid/webhook-deliveries`, { key: bobKey });
    for (const r of [theirs, missing, malformed]) {
      expect(r.status).toBe(404);
      expect(r.body).toEqual({ code: -1, message: 'job not found', data: {} });
    }

    const before = forEvent(rx, aliceEvent).length;
    const redo = await svc.call('POST', `/api/v1/jobs/${aliceJob}/webhook-deliveries/${aliceEvent}/redeliver`, {
      key: bobKey,
    });
    const redoMissing = await svc.call(
      'POST',
      `/api/v1/jobs/${missingJob}/webhook-deliveries/${aliceEvent}/redeliver`,
      { key: bobKey },
    );
    for (const r of [redo, redoMissing]) {
      expect(r.status).toBe(404);
      expect(r.body).toEqual({ code: -1, message: 'job not found', data: {} });
    }
    expect(forEvent(rx, aliceEvent)).toHaveLength(before);
  });

  it("answers another owner's event exactly like a missing one", async () => {
    const before = forEvent(rx, bobEvent).length;
    const theirs = await svc.call('POST', `/api/v1/jobs/${aliceJob}/webhook-deliveries/${bobEvent}/redeliver`);
    const missing = await svc.call('POST', `/api/v1/jobs/${aliceJob}/webhook-deliveries/${missingEvent}/redeliver`);
    const malformed = await svc.call('POST', `/api/v1/jobs/${aliceJob}/webhook-deliveries/nope/redeliver`);
    for (const r of [theirs, missing, malformed]) {
      expect(r.status).toBe(404);
      expect(r.body).toEqual({ code: -1, message: 'event not found', data: {} });
    }
    // An event belongs to its job: bob's event under bob's job, asked by alice, is a missing job.
    const cross = await svc.call('POST', `/api/v1/jobs/${bobJob}/webhook-deliveries/${bobEvent}/redeliver`);
    expect(cross.status).toBe(404);
    expect(cross.body.message).toBe('job not found');
    expect(forEvent(rx, bobEvent)).toHaveLength(before);
  });

  it('lists only the caller’s own deliveries', async () => {
    const mine = await svc.call('GET', `/api/v1/jobs/${bobJob}/webhook-deliveries`, { key: bobKey });
    expect(mine.status).toBe(200);
    expect(mine.body.data.deliveries.map((d: any) => d.event_id)).toEqual([bobEvent]);
  });

  it('requires an API key', async () => {
    const r = await svc.call('GET', `/api/v1/jobs/${aliceJob}/webhook-deliveries`, { key: null });
    expect(r.status).toBe(401);
    expect(r.body.code).toBe(-1);
  });
});

describe('job without a webhook', () => {
  it('has no events to redeliver', async () => {
    const uuid = await submit(svc);
    await waitTerminal(svc.call, uuid);
    const r = await svc.call(
      'POST',
      `/api/v1/jobs/${uuid}/webhook-deliveries/11111111-1111-4111-8111-111111111111/redeliver`,
    );
    expect(r.status).toBe(404);
    expect(r.body.message).toBe('event not found');
  });
});
