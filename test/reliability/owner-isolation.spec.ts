/**
 * Owner isolation: a second owner (mallory) tries every route on the first owner's (alice's) jobs
 * and webhook deliveries, in every state (queued, processing, completed, failed, cancelled), with
 * real ids (job uuids in any case, real event ids). Every attempt answers exactly what a job that
 * does not exist answers (same status, same body, same header names), lists never show alice's
 * jobs under any filter or cursor, an Idempotency-Key is scoped to its owner, and nothing about
 * alice's jobs changes: statuses, delivery histories, the receiver's request count.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleepJobType } from '../helpers/job-types.js';
import { startService, waitFor, waitTerminal, type Reply, type TestService } from '../helpers/service.js';
import { recordFigures, startHookReceiver, type HookReceiver } from './support.js';

let svc: TestService;
let rx: HookReceiver;
let mallory: string;
const MISSING = '3f1c0b7e-6a1d-4c1b-9f7e-2b8d4e6a0c11';

beforeAll(async () => {
  rx = await startHookReceiver('ok');
  svc = await startService(
    { WORKER_CONCURRENCY: '1', RATE_LIMIT_SUBMIT: '0', RATE_LIMIT_READ: '0' },
    { jobTypes: [sleepJobType()] },
  );
  mallory = await svc.newKey('mallory');
});
afterAll(async () => {
  await svc?.stop();
  await rx?.close();
});

const body = (input: Record<string, unknown>, path = '/alice') => ({
  job_type: 'test-sleep',
  model: 'v1',
  input,
  webhook: { url: rx.url(path), secret: 'alice-secret' },
});

/** What a reply looks like for comparison: status, exact body text, header names that matter. */
function shape(r: Reply): { status: number; text: string; headers: string[] } {
  const names: string[] = [];
  r.headers.forEach((_v, k) => {
    if (!['date', 'x-request-id', 'ratelimit', 'ratelimit-policy', 'connection', 'keep-alive'].includes(k))
      names.push(k);
  });
  return { status: r.status, text: r.text, headers: names.sort() };
}

describe('owner isolation', () => {
  it("answers every route on another owner's jobs and deliveries exactly like a missing job, and changes nothing", async () => {
    const call = svc.call;
    // Alice's jobs in every state; the processing one holds the only worker, so the next stays queued.
    const submit = async (input: Record<string, unknown>, idem?: string) => {
      const r = await call('POST', '/api/v1/jobs/submit/test-sleep', {
        body: body(input),
        headers: idem ? { 'idempotency-key': idem } : {},
      });
      expect(r.status, r.text).toBe(200);
      return r.body.data.uuid as string;
    };
    const completed = await submit({ ms: 0 }, 'alice-key-1');
    const failed = await submit({ ms: 0, fail: 'processing_error' });
    await waitTerminal(call, completed);
    await waitTerminal(call, failed);
    const cancelled = await submit({ ms: 120_000 });
    await waitFor(
      async () => (await call('GET', `/api/v1/jobs/${cancelled}/status`)).body.data.status === 'processing',
      'processing',
    );
    expect((await call('POST', `/api/v1/jobs/${cancelled}/cancel`)).status).toBe(200);
    const processing = await submit({ ms: 120_000 });
    await waitFor(
      async () => (await call('GET', `/api/v1/jobs/${processing}/status`)).body.data.status === 'processing',
      'processing',
    );
    const queued = await submit({ ms: 1 });
    expect((await call('GET', `/api/v1/jobs/${queued}/status`)).body.data.status).toBe('queued');
    const alice = { completed, failed, cancelled, processing, queued };
    const aliceJobs = Object.values(alice);

    // Real event ids of alice's terminal jobs.
    await waitFor(() => rx.deliveries.filter((d) => d.path === '/alice').length >= 3, "alice's webhooks");
    const aliceEvents = new Map<string, string>();
    for (const u of [completed, failed, cancelled]) {
      const d = (await call('GET', `/api/v1/jobs/${u}/webhook-deliveries`)).body.data.deliveries;
      expect(d).toHaveLength(1);
      aliceEvents.set(u, d[0].event_id);
    }
    // Mallory's own job, with its own event.
    const own = await call('POST', '/api/v1/jobs/submit/test-sleep', {
      body: body({ ms: 0 }, '/mallory'),
      key: mallory,
    });
    const ownJob = own.body.data.uuid as string;
    await waitFor(
      async () => (await call('GET', `/api/v1/jobs/${queued}/status`)).body.data.status === 'queued',
      'queued',
    );

    // --- alice's view before ---------------------------------------------------------------------
    const snapshot = async () => {
      const out: Record<string, unknown> = {};
      for (const u of aliceJobs) {
        const st = (await call('GET', `/api/v1/jobs/${u}/status`)).body.data;
        out[u] = {
          status: st.status,
          error_type: st.error_type,
          finished_at: st.finished_at,
          result_ready: st.result_ready,
          deliveries: (await call('GET', `/api/v1/jobs/${u}/webhook-deliveries`)).body.data,
        };
      }
      out.list = (await call('GET', '/api/v1/jobs?limit=100')).body.data.jobs.map((j: any) => `${j.uuid}:${j.status}`);
      out.receiver = rx.deliveries.filter((d) => aliceJobs.includes(d.jobUuid)).length;
      return out;
    };
    const before = await snapshot();

    // --- mallory tries everything ----------------------------------------------------------------
    let tried = 0;
    const mismatches: string[] = [];
    const asMallory = (method: string, url: string, opts: { body?: unknown; headers?: Record<string, string> } = {}) =>
      call(method, url, { ...opts, key: mallory });
    const compare = async (
      what: string,
      method: string,
      url: string,
      missingUrl: string,
      opts: { body?: unknown } = {},
    ) => {
      tried++;
      const theirs = shape(await asMallory(method, url, opts));
      const none = shape(await asMallory(method, missingUrl, opts));
      if (theirs.status !== 404 || JSON.stringify(theirs) !== JSON.stringify(none))
        mismatches.push(`${what}: ${JSON.stringify(theirs)} vs missing ${JSON.stringify(none)}`);
    };
    for (const [state, u] of Object.entries(alice)) {
      for (const variant of [u, u.toUpperCase()]) {
        const v = variant === u ? state : `${state} (upper-case uuid)`;
        await compare(`status of ${v}`, 'GET', `/api/v1/jobs/${variant}/status`, `/api/v1/jobs/${MISSING}/status`);
        await compare(
          `status?wait=5 of ${v}`,
          'GET',
          `/api/v1/jobs/${variant}/status?wait=5`,
          `/api/v1/jobs/${MISSING}/status?wait=5`,
        );
        await compare(`cancel of ${v}`, 'POST', `/api/v1/jobs/${variant}/cancel`, `/api/v1/jobs/${MISSING}/cancel`);
        await compare(`cancel {} of ${v}`, 'POST', `/api/v1/jobs/${variant}/cancel`, `/api/v1/jobs/${MISSING}/cancel`, {
          body: {},
        });
        await compare(`result of ${v}`, 'GET', `/api/v1/jobs/${variant}/result`, `/api/v1/jobs/${MISSING}/result`);
        await compare(
          `webhook-deliveries of ${v}`,
          'GET',
          `/api/v1/jobs/${variant}/webhook-deliveries`,
          `/api/v1/jobs/${MISSING}/webhook-deliveries`,
        );
        const ev = aliceEvents.get(u) ?? MISSING;
        await compare(
          `redeliver of ${v}'s real event`,
          'POST',
          `/api/v1/jobs/${variant}/webhook-deliveries/${ev}/redeliver`,
          `/api/v1/jobs/${MISSING}/webhook-deliveries/${ev}/redeliver`,
        );
      }
    }
    // Alice's real event ids under mallory's own job: "event not found", like any unknown event id.
    for (const ev of aliceEvents.values()) {
      tried++;
      const theirs = shape(await asMallory('POST', `/api/v1/jobs/${ownJob}/webhook-deliveries/${ev}/redeliver`));
      const none = shape(await asMallory('POST', `/api/v1/jobs/${ownJob}/webhook-deliveries/${MISSING}/redeliver`));
      if (theirs.status !== 404 || JSON.stringify(theirs) !== JSON.stringify(none))
        mismatches.push(`alice's event under mallory's job: ${JSON.stringify(theirs)} vs ${JSON.stringify(none)}`);
    }

    // Lists: no filter, status filter, job type filter, limits, and alice's own cursor.
    const aliceCursor = (await call('GET', '/api/v1/jobs?limit=1')).body.data.next_cursor as string;
    const leaks: string[] = [];
    for (const q of [
      '',
      '?limit=100',
      '?status=queued',
      '?status=processing',
      '?status=completed',
      '?status=failed',
      '?status=cancelled',
      '?job_type=test-sleep',
      `?cursor=${aliceCursor}`,
      `?limit=100&cursor=${aliceCursor}`,
      '?status=completed&job_type=test-sleep&limit=100',
    ]) {
      tried++;
      const r = await asMallory('GET', `/api/v1/jobs${q}`);
      if (r.status !== 200) leaks.push(`list${q}: HTTP ${r.status}`);
      const seen = (r.body.data?.jobs ?? []).map((j: any) => j.uuid as string);
      const leaked = seen.filter((u: string) => aliceJobs.includes(u));
      if (leaked.length > 0) leaks.push(`list${q}: shows ${leaked.join(', ')}`);
      if (seen.some((u: string) => u !== ownJob)) leaks.push(`list${q}: shows a job that is not mallory's`);
    }

    // Idempotency keys are scoped to their owner: alice's key, same body, makes mallory a new job.
    tried++;
    const reuse = await asMallory('POST', '/api/v1/jobs/submit/test-sleep', {
      body: body({ ms: 0 }),
      headers: { 'idempotency-key': 'alice-key-1' },
    });
    const idemScoped =
      reuse.status === 200 && reuse.body.data.uuid !== completed && reuse.headers.get('idempotent-replayed') === null;
    tried++;
    const reuse2 = await asMallory('POST', '/api/v1/jobs/submit/test-sleep', {
      body: body({ ms: 7 }),
      headers: { 'idempotency-key': 'alice-key-1' },
    });
    // Mallory's key now exists for mallory: a different body conflicts with *her* request, not alice's.
    const idemScoped2 = reuse2.status === 409;
    const aliceReplay = await call('POST', '/api/v1/jobs/submit/test-sleep', {
      body: body({ ms: 0 }),
      headers: { 'idempotency-key': 'alice-key-1' },
    });
    const aliceStillHers =
      aliceReplay.status === 200 &&
      aliceReplay.body.data.uuid === completed &&
      aliceReplay.headers.get('idempotent-replayed') === 'true';

    // --- alice's view after ----------------------------------------------------------------------
    const after = await snapshot();
    const processingStill = (await call('GET', `/api/v1/jobs/${processing}/status`)).body.data.status;

    recordFigures('owner isolation', {
      'requests tried by the second owner': tried,
      "alice's jobs targeted (states)": Object.keys(alice).join(', '),
      "alice's real event ids targeted": aliceEvents.size,
      'answers different from a missing job': mismatches.length,
      'list leaks': leaks.length,
      'Idempotency-Key scoped to the owner': idemScoped && idemScoped2 && aliceStillHers,
      "alice's jobs, deliveries and receiver unchanged": JSON.stringify(before) === JSON.stringify(after),
    });

    expect(mismatches).toEqual([]);
    expect(leaks).toEqual([]);
    expect({ idemScoped, idemScoped2, aliceStillHers }).toEqual({
      idemScoped: true,
      idemScoped2: true,
      aliceStillHers: true,
    });
    expect(after).toEqual(before);
    expect(processingStill).toBe('processing');
    for (const u of [processing, queued]) await call('POST', `/api/v1/jobs/${u}/cancel`);
  });
});
