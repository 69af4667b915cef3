import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleepJobType } from '../helpers/job-types.js';
import { startService, waitFor, waitTerminal, type TestService } from '../helpers/service.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService({ WORKER_CONCURRENCY: '2' }, { jobTypes: [sleepJobType()] });
});
afterAll(() => svc?.stop());

const sleepJob = (input: Record<string, unknown>) => ({ job_type: 'test-sleep', model: 'v1', input });
const submit = async (input: Record<string, unknown>, key?: string) =>
  (await svc.call('POST', '/api/v1/jobs/submit/test-sleep', { body: sleepJob(input), ...(key ? { key } : {}) })).body
    .data;
const status = async (uuid: string) => (await svc.call('GET', `/api/v1/jobs/${uuid}/status`)).body.data;

describe('cancel', () => {
  it('cancels a processing job at once and aborts its work', async () => {
    const job = await submit({ ms: 120_000 });
    await waitFor(async () => (await status(job.uuid)).status === 'processing', 'processing');
    const r = await svc.call('POST', `/api/v1/jobs/${job.uuid}/cancel`);
    expect(r.status).toBe(200);
    expect(r.body.data).toMatchObject({ uuid: job.uuid, status: 'cancelled', result_ready: false });
    expect(r.body.data.finished_at).not.toBeNull();
    // The worker slot frees up because the processor was aborted, not because it finished.
    await waitFor(() => (svc.app.workers!.activeJobs === 0 ? true : undefined), 'the worker to let go');
    expect((await status(job.uuid)).status).toBe('cancelled');
  });

  it('discards the late result of a processor that ignores the abort', async () => {
    const job = await submit({ ms: 1500, ignore_abort: true });
    await waitFor(async () => (await status(job.uuid)).status === 'processing', 'processing');
    expect((await svc.call('POST', `/api/v1/jobs/${job.uuid}/cancel`)).status).toBe(200);
    await waitFor(() => (svc.app.workers!.activeJobs === 0 ? true : undefined), 'the processor to return');
    const after = await status(job.uuid);
    expect(after).toMatchObject({ status: 'cancelled', result_ready: false });
    const files = fs.readdirSync(path.join(svc.dataDir, 'results')).filter((f) => f.startsWith(job.uuid));
    expect(files).toEqual([]);
    expect((await svc.call('GET', `/api/v1/jobs/${job.uuid}/result`)).status).toBe(409);
  });

  it('cancels a queued job, and answers 409 for any terminal job', async () => {
    // Fill both worker slots so the third job stays queued.
    const busy = [await submit({ ms: 120_000 }), await submit({ ms: 120_000 })];
    await waitFor(
      async () => (await Promise.all(busy.map((b) => status(b.uuid)))).every((s) => s.status === 'processing'),
      'busy workers',
    );
    const queued = await submit({ ms: 1 });
    expect((await status(queued.uuid)).status).toBe('queued');
    const r = await svc.call('POST', `/api/v1/jobs/${queued.uuid}/cancel`);
    expect(r.body.data.status).toBe('cancelled');
    const again = await svc.call('POST', `/api/v1/jobs/${queued.uuid}/cancel`);
    expect(again.status).toBe(409);
    expect(again.body).toEqual({
      code: -1,
      message: 'job is already cancelled; only queued or processing jobs can be cancelled',
      data: {},
    });
    for (const b of busy) await svc.call('POST', `/api/v1/jobs/${b.uuid}/cancel`);

    const done = await submit({ ms: 1 });
    await waitTerminal(svc.call, done.uuid);
    const late = await svc.call('POST', `/api/v1/jobs/${done.uuid}/cancel`);
    expect(late.status).toBe(409);
    expect(late.body.message).toBe('job is already completed; only queued or processing jobs can be cancelled');
    expect((await status(done.uuid)).status).toBe('completed');
  });
});

describe('owner isolation', () => {
  it("answers another owner's job exactly like a missing one, on every route", async () => {
    const mallory = await svc.newKey('mallory');
    const job = await submit({ ms: 1 });
    await waitTerminal(svc.call, job.uuid);
    const missing = '00000000-0000-4000-8000-000000000000';
    for (const [method, suffix] of [
      ['GET', 'status'],
      ['POST', 'cancel'],
      ['GET', 'result'],
    ] as const) {
      const theirs = await svc.call(method, `/api/v1/jobs/${job.uuid}/${suffix}`, { key: mallory });
      const none = await svc.call(method, `/api/v1/jobs/${missing}/${suffix}`, { key: mallory });
      const junk = await svc.call(method, `/api/v1/jobs/not-a-uuid/${suffix}`, { key: mallory });
      for (const r of [theirs, none, junk]) {
        expect(r.status).toBe(404);
        expect(r.body).toEqual({ code: -1, message: 'job not found', data: {} });
      }
    }
    // Nothing changed for the owner.
    expect((await status(job.uuid)).status).toBe('completed');
    expect((await svc.call('GET', `/api/v1/jobs/${job.uuid}/result`)).status).toBe(200);
  });

  it('treats upper-case uuids as the same job for the owner', async () => {
    const job = await submit({ ms: 1 });
    const r = await svc.call('GET', `/api/v1/jobs/${job.uuid.toUpperCase()}/status`);
    expect(r.body.data.uuid).toBe(job.uuid);
  });
});
