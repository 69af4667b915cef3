import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorkerToken } from '../../src/store/worker-tokens.js';
import { sleepJobType } from '../helpers/job-types.js';
import { declaredTypesFile } from '../remote/support.js';
import { startS3, type S3Server } from '../helpers/s3.js';
import { startService, waitFor, waitTerminal, type TestService } from '../helpers/service.js';

/**
 * Result storage (a real S3-compatible server, s3rver) stopped for 10 s while jobs upload: no job
 * fails (the outage is shorter than JOB_TIMEOUT), every one completes once the storage is back
 * with a result that downloads, the jobs say what they wait for, and /readyz answers 503 with the
 * reason meanwhile and 200 again afterwards.
 */
const OUTAGE_MS = 10_000;
const JOBS = 6;

let s3: S3Server;
let svc: TestService;
const saved: Record<string, string | undefined> = {};

beforeAll(async () => {
  s3 = await startS3();
  // The AWS SDK reads credentials from the process environment, as in production.
  for (const k of ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY']) {
    saved[k] = process.env[k];
    process.env[k] = s3.env[k];
  }
  svc = await startService(
    { ...s3.env, WORKER_CONCURRENCY: '3', JOB_TIMEOUT: '60s', RATE_LIMIT_READ: '0' },
    { jobTypes: [sleepJobType()] },
  );
});
afterAll(async () => {
  await svc?.stop();
  await s3?.close();
  for (const [k, v] of Object.entries(saved))
    if (v === undefined) Reflect.deleteProperty(process.env, k);
    else process.env[k] = v;
});

const submit = async (ms: number): Promise<string> => {
  const r = await svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
    body: { job_type: 'test-sleep', model: 'v1', input: { ms } },
  });
  expect(r.status, r.text).toBe(200);
  return r.body.data.uuid as string;
};
const readyz = () => svc.call('GET', '/readyz', { key: null });

describe('result storage down for 10 s while jobs upload', () => {
  it('fails no job, completes them all when it returns, and /readyz says why meanwhile', async () => {
    expect((await waitTerminal(svc.call, await submit(0))).status).toBe('completed');
    expect((await readyz()).status).toBe(200);

    await s3.stop();
    const down = performance.now();
    const uuids: string[] = [];
    for (let i = 0; i < JOBS; i++) uuids.push(await submit(100));

    // /readyz: 503 in the envelope, with the reason, once the first upload has failed.
    const notReady = await waitFor(async () => {
      const r = await readyz();
      return r.status === 503 ? r : undefined;
    }, '/readyz to report the storage outage');
    expect(notReady.body).toMatchObject({ code: -1, data: {} });
    expect(notReady.body.message).toMatch(/^result storage unavailable: ECONNREFUSED/);
    expect(notReady.headers.get('retry-after')).toBeTruthy();

    // The running jobs say what they wait for; no job ends while the storage is down.
    const waiting = new Set<string>();
    while (performance.now() - down < OUTAGE_MS) {
      for (const uuid of uuids) {
        const job = (await svc.call('GET', `/api/v1/jobs/${uuid}/status`)).body.data;
        expect(['queued', 'processing'], `${uuid} is ${job.status} during the outage`).toContain(job.status);
        if (job.status_detail === 'waiting for result storage') waiting.add(uuid);
      }
      expect((await readyz()).status).toBe(503);
      await new Promise((r) => setTimeout(r, 500));
    }
    expect(waiting.size).toBeGreaterThanOrEqual(1);

    await s3.start();
    const back = performance.now();
    let lastDone = 0;
    for (const uuid of uuids) {
      const job = await waitTerminal(svc.call, uuid);
      lastDone = Math.max(lastDone, Date.parse(job.finished_at));
      expect(job, uuid).toMatchObject({ status: 'completed', error_type: null, result_ready: true });
      const result = (await svc.call('GET', `/api/v1/jobs/${uuid}/result`)).body.data;
      const download = await fetch(result.url);
      expect(download.status).toBe(200);
      expect(await download.json()).toEqual({ slept: 100 });
    }
    await waitFor(async () => (await readyz()).status === 200, '/readyz to be ready again');
    // The figure for the README (not asserted: no timing targets in tests).
    const backAt = Date.now() - (performance.now() - back);
    console.log(
      `[faults] storage outage: ${uuids.length} jobs, ${waiting.size} seen waiting; the last completed ${Math.round(lastDone - backAt)} ms after the storage returned`,
    );
  });
});

describe('result storage down for longer than a job may run', () => {
  it('ends the job as a timeout that says the storage was unavailable', async () => {
    const short = await startService({ ...s3.env, JOB_TIMEOUT: '2s' }, { jobTypes: [sleepJobType()] });
    try {
      await s3.stop();
      const r = await short.call('POST', '/api/v1/jobs/submit/test-sleep', {
        body: { job_type: 'test-sleep', model: 'v1', input: { ms: 0 } },
      });
      expect(r.status, r.text).toBe(200);
      const job = await waitTerminal(short.call, r.body.data.uuid);
      expect(job).toMatchObject({
        status: 'failed',
        error_type: 'timeout',
        error_message: 'job ran longer than the 2s limit (the result storage was unavailable)',
        result_ready: false,
      });
    } finally {
      await s3.start();
      await short.stop();
    }
  });
});

describe('result storage down while a remote worker uploads its output', () => {
  it('answers 503 with the reason, and takes the output again once the storage is back', async () => {
    const remote = await startService(
      { ...s3.env, JOB_TYPES_FILE: declaredTypesFile(), WORKER_CONCURRENCY: '0' },
      { jobTypes: [sleepJobType()] },
    );
    try {
      const token = (await createWorkerToken(remote.app.store.db, { name: 'w', jobTypes: null }, Date.now())).token;
      const sub = await remote.call('POST', '/api/v1/jobs/submit/test-remote-b', {
        body: { job_type: 'test-remote-b', model: 'v1', input: { text: 'x' } },
      });
      expect(sub.status, sub.text).toBe(200);
      const claim = await remote.call('POST', '/api/v1/worker/claim', {
        key: token,
        body: { job_types: ['test-remote-b'], wait: 5 },
      });
      const job = claim.body.data.job;
      expect(job.uuid).toBe(sub.body.data.uuid);
      const upload = async () => {
        const res = await fetch(
          `${remote.base}/api/v1/worker/jobs/${job.uuid}/output?lease_token=${encodeURIComponent(job.lease_token)}`,
          {
            method: 'PUT',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'text/plain' },
            body: 'hello',
          },
        );
        return { status: res.status, body: await res.json() };
      };

      await s3.stop();
      const refused = await upload();
      expect(refused.status).toBe(503);
      expect(refused.body).toMatchObject({ code: -1, data: {} });
      expect(refused.body.message).toMatch(/^result storage unavailable: ECONNREFUSED; retry later$/);

      await s3.start();
      expect((await upload()).status).toBe(200);
      const done = await remote.call('POST', `/api/v1/worker/jobs/${job.uuid}/complete`, {
        key: token,
        body: { lease_token: job.lease_token },
      });
      expect(done.status, done.text).toBe(200);
      expect((await waitTerminal(remote.call, job.uuid)).status).toBe('completed');
    } finally {
      await s3.start();
      await remote.stop();
    }
  });
});
