import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook } from '../../src/index.js';
import { sleepJobType } from '../helpers/job-types.js';
import { freePort, startService, waitFor, waitTerminal, type TestService } from '../helpers/service.js';
import { startReceiver, type Receiver } from './receiver.js';

// startService's schedule: 0,200ms,400ms,600ms,800ms (five attempts).
const SCHEDULE = [0, 200, 400, 600, 800];
/** Date.now() is read on both sides of a loopback socket: allow for rounding, never for slowness. */
const TOLERANCE_MS = 25;
const SECRET = 'whsec_retry_test';

const cleanup: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const f of cleanup.reverse()) await f();
});

async function service(env: Record<string, string> = {}): Promise<TestService> {
  const svc = await startService(env, { jobTypes: [sleepJobType()] });
  cleanup.push(() => svc.stop());
  return svc;
}
async function receiver(...args: Parameters<typeof startReceiver>): Promise<Receiver> {
  const rx = await startReceiver(...args);
  cleanup.push(() => rx.close());
  return rx;
}

async function submit(
  svc: TestService,
  webhook: Record<string, unknown>,
  input: Record<string, unknown> = { ms: 0 },
): Promise<string> {
  const res = await svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
    body: { job_type: 'test-sleep', model: 'v1', input, webhook },
  });
  expect(res.status, res.text).toBe(200);
  return res.body.data.uuid;
}

async function deliveryIn(svc: TestService, uuid: string, state: string): Promise<any> {
  return waitFor(async () => {
    const d = (await svc.call('GET', `/api/v1/jobs/${uuid}/webhook-deliveries`)).body.data?.deliveries?.[0];
    return d?.state === state ? d : undefined;
  }, `delivery of ${uuid} to be ${state}`);
}

describe('webhook retries (shortened schedule)', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await service();
  });

  it('retries a receiver that fails twice: three attempts, one event id, identical bytes, spaced by the schedule', async () => {
    const rx = await receiver((_r, n) => (n <= 2 ? 500 : 200));
    const uuid = await submit(svc, { url: rx.url(), secret: SECRET });
    const reqs = await rx.waitForCount(3);
    const d = await deliveryIn(svc, uuid, 'delivered');

    const ids = new Set(reqs.map((r) => r.headers['x-service-event-id']));
    expect(ids.size).toBe(1);
    expect(reqs[1]!.raw.equals(reqs[0]!.raw)).toBe(true);
    expect(reqs[2]!.raw.equals(reqs[0]!.raw)).toBe(true);
    for (const r of reqs) expect(verifyWebhook(r.raw, r.headers, SECRET).event_id).toBe(d.event_id);
    // Retry i comes schedule[i] after the failure of attempt i (the receiver answered after `at`).
    expect(reqs[1]!.at - reqs[0]!.at).toBeGreaterThanOrEqual(SCHEDULE[1]! - TOLERANCE_MS);
    expect(reqs[2]!.at - reqs[1]!.at).toBeGreaterThanOrEqual(SCHEDULE[2]! - TOLERANCE_MS);

    expect(d.attempts.map((a: any) => [a.attempt, a.http_status, a.ok, a.manual])).toEqual([
      [1, 500, false, false],
      [2, 500, false, false],
      [3, 200, true, false],
    ]);
    expect(d.attempts[0].error).toBe('HTTP 500');
    expect(d.next_attempt_at).toBeNull();
    // Delivered: no fourth attempt is ever scheduled.
    expect(rx.requests).toHaveLength(3);
  });

  it('gives up after five attempts of an always-failing receiver and shows the delivery failed', async () => {
    const rx = await receiver(() => 500);
    const uuid = await submit(svc, { url: rx.url() });
    const d = await deliveryIn(svc, uuid, 'failed');
    expect(rx.requests).toHaveLength(5);
    expect(new Set(rx.requests.map((r) => r.headers['x-service-event-id'])).size).toBe(1);
    expect(d.attempts.map((a: any) => a.attempt)).toEqual([1, 2, 3, 4, 5]);
    expect(d.attempts.every((a: any) => a.http_status === 500 && !a.ok && !a.manual)).toBe(true);
    expect(d.next_attempt_at).toBeNull();
    for (let i = 1; i < 5; i++) {
      expect(rx.requests[i]!.at - rx.requests[i - 1]!.at).toBeGreaterThanOrEqual(SCHEDULE[i]! - TOLERANCE_MS);
    }
  });

  it('counts a 3xx as a failure and does not follow it', async () => {
    const target = await receiver(() => 200);
    const rx = await receiver((_r, n) =>
      n === 1 ? { status: 302, headers: { location: target.url('/elsewhere') } } : 200,
    );
    const uuid = await submit(svc, { url: rx.url('/moved') });
    const d = await deliveryIn(svc, uuid, 'delivered');
    expect(d.attempts.map((a: any) => [a.http_status, a.ok])).toEqual([
      [302, false],
      [200, true],
    ]);
    expect(d.attempts[0].error).toMatch(/redirects are not followed/);
    expect(rx.requests.map((r) => r.path)).toEqual(['/moved', '/moved']);
    expect(target.requests).toHaveLength(0);
  });

  it('retries after a connection error, and records why', async () => {
    const port = await freePort(); // nothing listens there
    const uuid = await submit(svc, { url: `http://127.0.0.1:${port}/hook` });
    const d = await deliveryIn(svc, uuid, 'failed');
    expect(d.attempts).toHaveLength(5);
    for (const a of d.attempts) expect(a).toMatchObject({ http_status: null, ok: false, error: 'connection refused' });
  });
});

describe('webhook timeouts and fairness', () => {
  it('times out a hanging receiver (WEBHOOK_TIMEOUT) and retries it', async () => {
    const svc = await service({ WEBHOOK_TIMEOUT: '500ms' });
    const rx = await receiver((_r, n) => (n === 1 ? 'hang' : 200));
    const uuid = await submit(svc, { url: rx.url() });
    const d = await deliveryIn(svc, uuid, 'delivered');
    expect(d.attempts).toHaveLength(2);
    expect(d.attempts[0]).toMatchObject({ http_status: null, ok: false, error: 'timed out after 500ms' });
    expect(d.attempts[0].duration_ms).toBeGreaterThanOrEqual(500 - TOLERANCE_MS);
    expect(d.attempts[1]).toMatchObject({ http_status: 200, ok: true });
    expect(rx.requests[1]!.headers['x-service-event-id']).toBe(rx.requests[0]!.headers['x-service-event-id']);
    rx.release();
  });

  it('does not let a slow receiver delay a healthy one', async () => {
    // Two slots; a destination may hold at most one of them (ceil(2 / 4) = 1).
    const svc = await service({ WEBHOOK_CONCURRENCY: '2', WEBHOOK_TIMEOUT: '60s' });
    const slow = await receiver(() => 'hang');
    const healthy = await receiver(() => 200);
    const slowJobs = [];
    for (let i = 0; i < 3; i++) slowJobs.push(await submit(svc, { url: slow.url('/slow') }));
    for (const uuid of slowJobs) await waitTerminal(svc.call, uuid);
    await slow.waitForCount(1, 'the slow receiver to be holding a delivery');

    const fast = await submit(svc, { url: healthy.url('/fast') });
    const d = await deliveryIn(svc, fast, 'delivered');
    expect(d.attempts).toHaveLength(1);
    // The healthy delivery went through while the slow receiver still held its request
    // (nothing timed out, nothing was released), and the API answered meanwhile.
    expect(slow.hanging()).toBeGreaterThanOrEqual(1);
    expect(slow.requests.length).toBeLessThan(3);
    expect((await svc.call('GET', `/api/v1/jobs/${fast}/status`)).status).toBe(200);
    expect(slow.maxConcurrent()).toBe(1);

    // Let the slow receiver answer: its queued events follow, one at a time.
    slow.respond = () => 200;
    slow.release();
    for (const uuid of slowJobs) await deliveryIn(svc, uuid, 'delivered');
    expect(slow.maxConcurrent()).toBe(1);
    expect(new Set(slow.requests.map((r) => r.headers['x-service-event-id'])).size).toBe(3);
  });
});

describe('the public-address rule at delivery', () => {
  it('refuses to connect when the webhook host resolves to a private address at delivery time (DNS rebinding)', async () => {
    const rx = await receiver(() => 200);
    let phase: 'submit' | 'deliver' = 'submit';
    // Public at submit (passes validation), loopback when the dispatcher connects.
    const lookup = async (hostname: string) => {
      if (hostname !== 'hooks.rebind.example')
        throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
      return [{ address: phase === 'submit' ? '93.184.216.34' : '127.0.0.1', family: 4 }];
    };
    const svc = await startService({ MEDIA_ALLOW_PRIVATE_NETWORKS: 'false' }, { jobTypes: [sleepJobType()], lookup });
    cleanup.push(() => svc.stop());
    const sub = await svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
      body: {
        job_type: 'test-sleep',
        model: 'v1',
        input: { ms: 1000 },
        webhook: { url: `http://hooks.rebind.example:${rx.port}/hook` },
      },
    });
    expect(sub.status, sub.text).toBe(200);
    phase = 'deliver';
    const d = await deliveryIn(svc, sub.body.data.uuid, 'failed');
    expect(d.attempts).toHaveLength(5);
    for (const a of d.attempts)
      expect(a).toMatchObject({ http_status: null, ok: false, error: 'refused: the host is not a public address' });
    expect(rx.requests).toHaveLength(0);
  });
});
