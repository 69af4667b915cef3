import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminToken, revokeAdminToken } from '../../src/store/admin-tokens.js';
import { createWorkerToken } from '../../src/store/worker-tokens.js';
import { sleepJobType } from '../helpers/job-types.js';
import { startService, waitFor, type TestService } from '../helpers/service.js';
import { startReceiver, type Receiver } from '../webhooks/receiver.js';

// /admin/api: its own auth (admin tokens, never API keys), and what the operator view reads.
let svc: TestService;
let receiver: Receiver;
let token: string;
beforeAll(async () => {
  receiver = await startReceiver(() => 500);
  svc = await startService({}, { jobTypes: [sleepJobType()] });
  token = (await createAdminToken(svc.app.store.db, Date.now())).token;
});
afterAll(async () => {
  await svc?.stop();
  await receiver?.close();
});

const admin = (method: string, url: string, body?: unknown, key = token) =>
  svc.call(method, `/admin/api${url}`, { key, body });

describe('/admin/api', () => {
  it('takes admin tokens only, and admin tokens do not open the public API', async () => {
    expect((await admin('GET', '/overview', undefined, svc.key)).status).toBe(401);
    expect((await svc.call('GET', '/admin/api/overview', { key: null })).body).toMatchObject({ code: -1 });
    expect((await svc.call('GET', '/api/v1/jobs', { key: token })).status).toBe(401);
    const other = await createAdminToken(svc.app.store.db, Date.now());
    expect((await admin('GET', '/overview', undefined, other.token)).status).toBe(200);
    await revokeAdminToken(svc.app.store.db, other.id, Date.now());
    expect((await admin('GET', '/overview', undefined, other.token)).status).toBe(401);
  });

  it('reports queue depth, throughput, workers and failed deliveries', async () => {
    const r = await svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
      body: { job_type: 'test-sleep', model: 'v1', input: { ms: 1 }, webhook: { url: receiver.url('/h') } },
    });
    const uuid = r.body.data.uuid;
    const failed = await waitFor(async () => {
      const f = await admin('GET', '/failed-deliveries');
      return f.body.data.deliveries.find((d: { job_uuid: string }) => d.job_uuid === uuid);
    }, 'the delivery to fail');
    expect(failed).toMatchObject({ owner: svc.owner, event_type: 'job.completed', attempts: 5, last_status: 500 });
    const o = (await admin('GET', '/overview')).body.data;
    expect(o.queue).toEqual({ queued: 0, processing: 0 });
    expect(o.throughput.per_minute).toHaveLength(60);
    expect(o.throughput.finished_last_hour).toBeGreaterThanOrEqual(1);
    const w = (await admin('GET', '/workers')).body.data;
    expect(w.local).toEqual([expect.objectContaining({ concurrency: 2, job_types: ['test-sleep'] })]);
  });

  it('lists remote workers (their tokens) with when each was last seen', async () => {
    const t = await createWorkerToken(svc.app.store.db, { name: 'gpu-box', jobTypes: ['upscale'] }, Date.now());
    const before = (await admin('GET', '/workers')).body.data.remote.find((x: { id: string }) => x.id === t.id);
    expect(before).toMatchObject({ name: 'gpu-box', job_types: ['upscale'], last_seen_at: null, revoked_at: null });
    // Any call to /api/v1/worker counts as seen (this service declares no remote type: a 400).
    await svc.call('POST', '/api/v1/worker/claim', { key: t.token, body: {} });
    const seen = await waitFor(
      async () =>
        (await admin('GET', '/workers')).body.data.remote.find(
          (x: { id: string; last_seen_at: string | null }) => x.id === t.id && x.last_seen_at,
        ),
      'last_seen_at',
    );
    expect(Date.parse(seen.last_seen_at)).toBeGreaterThan(0);
  });

  it('creates, lists and revokes API keys', async () => {
    const bad = await admin('POST', '/keys', { owner: '' });
    expect(bad.status).toBe(400);
    const k = (await admin('POST', '/keys', { owner: 'dave' })).body.data;
    expect(k.key).toMatch(/^mj_/);
    expect((await svc.call('GET', '/api/v1/jobs', { key: k.key })).status).toBe(200);
    expect((await admin('GET', '/keys')).body.data.keys).toContainEqual(
      expect.objectContaining({ id: k.id, owner: 'dave', revoked_at: null }),
    );
    expect((await admin('POST', `/keys/${k.id}/revoke`)).body.data).toEqual({ id: k.id, revoked: true });
    expect((await admin('POST', `/keys/${k.id}/revoke`)).status).toBe(404);
    expect((await svc.call('GET', '/api/v1/jobs', { key: k.key })).status).toBe(401);
  });
});
