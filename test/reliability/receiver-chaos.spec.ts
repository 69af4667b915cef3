/**
 * Receiver chaos: webhook receivers that hang, answer too late (past WEBHOOK_TIMEOUT), accept TCP
 * and never speak HTTP, reset the connection, answer 3xx/4xx/5xx or garbage, or refuse the
 * connection, mixed with healthy ones. With 20+ chaotic deliveries in flight, every healthy
 * delivery still arrives within BOUND_MS of its job finishing (the dispatcher caps deliveries per
 * destination, ceil(WEBHOOK_CONCURRENCY / 4), so dead receivers cannot take every slot), exactly
 * once, and each chaotic attempt is recorded as the failure it was.
 *
 * The only upper time bound in the suite, and a generous one: BOUND_MS (5 s) is below
 * WEBHOOK_TIMEOUT (6 s), so a healthy delivery queued behind a hung one would fail it.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { sleepJobType } from '../helpers/job-types.js';
import { freePort, startService, waitFor, type TestService } from '../helpers/service.js';
import {
  percentile,
  recordFigures,
  sleep,
  startHookReceiver,
  startStallReceiver,
  type HookReceiver,
} from './support.js';

const BOUND_MS = 5_000;
const WEBHOOK_TIMEOUT = '6s';
const HEALTHY_JOBS = 30;

let svc: TestService | undefined;
const closers: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of closers) await c().catch(() => undefined);
  await svc?.stop();
});

describe('webhook receiver chaos', () => {
  it(`delivers to healthy receivers within ${BOUND_MS} ms while 20+ chaotic deliveries are in flight`, async () => {
    svc = await startService(
      {
        WORKER_CONCURRENCY: '4',
        WEBHOOK_CONCURRENCY: '32',
        WEBHOOK_TIMEOUT,
        WEBHOOK_RETRY_SCHEDULE: '0,200ms,400ms,600ms,800ms',
        RATE_LIMIT_SUBMIT: '0',
        RATE_LIMIT_READ: '0',
      },
      { jobTypes: [sleepJobType()] },
    );
    const s = svc;
    const healthy = [await startHookReceiver('ok'), await startHookReceiver(204), await startHookReceiver('ok')];
    const hang = await startHookReceiver('hang');
    const slow = await startHookReceiver({ delayMs: 8_000, status: 200 });
    const stall = await startStallReceiver();
    const fast: Record<string, HookReceiver> = {
      reset: await startHookReceiver('reset'),
      redirect: await startHookReceiver({ status: 302, headers: { location: healthy[0]!.url('/redirected') } }),
      '404': await startHookReceiver(404),
      '410': await startHookReceiver(410),
      '500': await startHookReceiver(500),
      '503': await startHookReceiver(503),
      garbage: await startHookReceiver('garbage'),
    };
    const refusedUrl = `http://127.0.0.1:${await freePort()}/hook`;
    for (const r of [...healthy, hang, slow, ...Object.values(fast)]) closers.push(() => r.close());
    closers.push(() => stall.close());

    const submit = async (url: string) => {
      const r = await s.call('POST', '/api/v1/jobs/submit/test-sleep', {
        body: { job_type: 'test-sleep', model: 'v1', input: { ms: 0 }, webhook: { url } },
      });
      expect(r.status, r.text).toBe(200);
      return r.body.data.uuid as string;
    };
    const chaoticInFlight = () => hang.inFlight() + slow.inFlight() + stall.open();

    // Phase 1: a backlog of chaotic deliveries, more than the per-destination cap for each dead receiver.
    const chaoticJobs: Record<string, string> = {};
    for (const [name, r] of [
      ['hang', hang],
      ['slow', slow],
      ['stall', stall],
    ] as const) {
      const uuids = await Promise.all(Array.from({ length: 14 }, () => submit(r.url())));
      chaoticJobs[name] = uuids[0]!;
    }
    for (let i = 0; i < 3; i++) {
      for (const [name, r] of Object.entries(fast)) {
        const u = await submit(r.url());
        chaoticJobs[name] ??= u;
      }
      const u = await submit(refusedUrl);
      chaoticJobs.refused ??= u;
    }
    await waitFor(() => chaoticInFlight() >= 20, '20 chaotic deliveries in flight', 60_000);

    // Phase 2: healthy jobs, one every 150 ms, while chaos continues (more fast-failing jobs too).
    const samples: number[] = [];
    const healthyJobs: Array<{ uuid: string; rx: HookReceiver }> = [];
    let healthzDuring = 0;
    for (let i = 0; i < HEALTHY_JOBS; i++) {
      const rx = healthy[i % healthy.length]!;
      samples.push(chaoticInFlight());
      healthyJobs.push({ uuid: await submit(rx.url(`/hook/${i}`)), rx });
      if (i % 3 === 0) await submit(Object.values(fast)[i % Object.keys(fast).length]!.url());
      if (i === HEALTHY_JOBS / 2) healthzDuring = (await s.call('GET', '/healthz')).status;
      await sleep(150);
    }
    const delivered = await waitFor(
      () => (healthyJobs.every((j) => j.rx.deliveries.some((d) => d.jobUuid === j.uuid)) ? true : undefined),
      'every healthy delivery',
      60_000,
    ).catch(() => false);
    samples.push(chaoticInFlight());

    const delays: number[] = [];
    const late: string[] = [];
    const missing: string[] = [];
    const dupes: string[] = [];
    for (const j of healthyJobs) {
      const ds = j.rx.deliveries.filter((d) => d.jobUuid === j.uuid);
      if (ds.length === 0) {
        missing.push(j.uuid);
        continue;
      }
      if (ds.length > 1) dupes.push(`${j.uuid} ×${ds.length}`);
      const delay = ds[0]!.at - ds[0]!.occurredAt;
      delays.push(delay);
      if (delay > BOUND_MS) late.push(`${j.uuid}: ${delay} ms after the job finished`);
    }

    // Each chaotic attempt is on record as the failure it was (first attempt of one job per receiver).
    const expectations: Record<string, { http: number | null; error: RegExp }> = {
      hang: { http: null, error: /^timed out after 6s$/ },
      slow: { http: null, error: /^timed out after 6s$/ },
      stall: { http: null, error: /^timed out after 6s$/ },
      reset: { http: null, error: /closed by the receiver|network error/ },
      garbage: { http: null, error: /closed by the receiver|network error/ },
      refused: { http: null, error: /^connection refused$/ },
      redirect: { http: 302, error: /^HTTP 302: redirects are not followed$/ },
      '404': { http: 404, error: /^HTTP 404$/ },
      '410': { http: 410, error: /^HTTP 410$/ },
      '500': { http: 500, error: /^HTTP 500$/ },
      '503': { http: 503, error: /^HTTP 503$/ },
    };
    const recorded: Record<string, string> = {};
    const misrecorded: string[] = [];
    for (const [name, uuid] of Object.entries(chaoticJobs)) {
      const first = await waitFor(
        async () => {
          const d = (await s.call('GET', `/api/v1/jobs/${uuid}/webhook-deliveries`)).body.data?.deliveries?.[0];
          return d?.attempts?.length > 0 ? d.attempts[0] : undefined;
        },
        `the first attempt to ${name}`,
        60_000,
      );
      recorded[name] = `${first.http_status ?? '–'} ${first.error}`;
      const e = expectations[name]!;
      if (first.ok !== false || first.http_status !== e.http || !e.error.test(first.error ?? ''))
        misrecorded.push(`${name}: ${JSON.stringify(first)}`);
    }
    const chaoticRequests =
      hang.requests() + slow.requests() + stall.accepted() + Object.values(fast).reduce((n, r) => n + r.requests(), 0);
    const followedRedirect = healthy[0]!.deliveries.filter((d) => d.path === '/redirected').length;

    recordFigures('receiver chaos', {
      'WEBHOOK_CONCURRENCY / per destination / WEBHOOK_TIMEOUT': `32 / 8 / ${WEBHOOK_TIMEOUT}`,
      'chaotic receivers': 'hang, answer after 8 s, TCP stall, reset, 302, 404, 410, 500, 503, garbage, refused',
      'healthy receivers': healthy.length,
      'chaotic deliveries in flight while healthy jobs ran (min / median / max)': `${Math.min(...samples)} / ${percentile(samples, 50)} / ${Math.max(...samples)}`,
      'chaotic attempts received by chaotic receivers': chaoticRequests,
      'healthy jobs': HEALTHY_JOBS,
      'healthy deliveries received': delays.length,
      'healthy delivery delay after the job finished, ms (p50 / p95 / max)': `${percentile(delays, 50)} / ${percentile(delays, 95)} / ${Math.max(...delays)}`,
      'bound, ms': BOUND_MS,
      'healthy duplicates': dupes.length,
      'redirects followed': followedRedirect,
      'first attempt as recorded, per chaotic receiver': recorded,
      'GET /healthz during chaos': healthzDuring,
    });

    expect(percentile(samples, 50)).toBeGreaterThanOrEqual(20);
    expect(delivered).toBe(true);
    expect(missing).toEqual([]);
    expect(late).toEqual([]);
    expect(dupes).toEqual([]);
    expect(followedRedirect).toBe(0);
    expect(misrecorded).toEqual([]);
    expect(healthzDuring).toBe(200);
  });

  it('reports (no time bound) what happens when dead destinations outnumber what the per-destination cap protects', async () => {
    // Default WEBHOOK_CONCURRENCY 16 → at most 4 per destination; 6 hanging receivers can hold all 16 slots.
    const svc2 = await startService(
      {
        WORKER_CONCURRENCY: '4',
        WEBHOOK_TIMEOUT: '4s',
        WEBHOOK_RETRY_SCHEDULE: '0,200ms,400ms,600ms,800ms',
        RATE_LIMIT_SUBMIT: '0',
        RATE_LIMIT_READ: '0',
      },
      { jobTypes: [sleepJobType()] },
    );
    const dead = await Promise.all(Array.from({ length: 6 }, () => startHookReceiver('hang')));
    const ok = await startHookReceiver('ok');
    try {
      const submit = async (url: string) =>
        (
          await svc2.call('POST', '/api/v1/jobs/submit/test-sleep', {
            body: { job_type: 'test-sleep', model: 'v1', input: { ms: 0 }, webhook: { url } },
          })
        ).body.data.uuid as string;
      for (const d of dead) await Promise.all(Array.from({ length: 5 }, () => submit(d.url())));
      await waitFor(
        () => dead.reduce((n, d) => n + d.inFlight(), 0) >= 16,
        'every delivery slot held by a dead receiver',
        60_000,
      );
      const uuids: string[] = [];
      for (let i = 0; i < 10; i++) {
        uuids.push(await submit(ok.url()));
        await sleep(200);
      }
      await waitFor(
        () => uuids.every((u) => ok.deliveries.some((d) => d.jobUuid === u)),
        'the healthy deliveries',
        60_000,
      );
      const delays = uuids.map((u) => {
        const d = ok.deliveries.find((x) => x.jobUuid === u)!;
        return d.at - d.occurredAt;
      });
      recordFigures('receiver chaos, beyond the fairness cap (report only)', {
        setup: '6 hanging receivers, WEBHOOK_CONCURRENCY 16 (4 per destination), WEBHOOK_TIMEOUT 4s',
        'healthy delivery delay, ms (p50 / max)': `${percentile(delays, 50)} / ${Math.max(...delays)}`,
        reading:
          'with more dead destinations than concurrency / per-destination cap, a healthy delivery waits for a slot: up to WEBHOOK_TIMEOUT',
      });
      expect(delays).toHaveLength(10);
    } finally {
      for (const r of [...dead, ok]) await r.close();
      await svc2.stop();
    }
  });
});
