import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MediaJobsClient, MediaJobsError, type JobEvent } from '../../src/client/index.js';
import { sleepJobType } from '../helpers/job-types.js';
import { startService, type TestService } from '../helpers/service.js';

let svc: TestService;
let client: MediaJobsClient;
beforeAll(async () => {
  svc = await startService({ WORKER_CONCURRENCY: '1' }, { jobTypes: [sleepJobType()] });
  client = new MediaJobsClient({ baseUrl: svc.base, apiKey: svc.key, retryDelayMs: 20 });
});
afterAll(() => svc?.stop());

const collect = async (it: AsyncIterable<JobEvent>) => {
  const out: JobEvent[] = [];
  for await (const e of it) out.push(e);
  return out;
};

describe('client.watch (Server-Sent Events)', () => {
  it('yields the states of a job in order and returns after the terminal one', async () => {
    const job = await client.submit('test-sleep', { model: 'v1', input: { ms: 300 } });
    const events = await collect(client.watch(job.uuid));
    expect(events[0]).toMatchObject({ type: 'status' });
    expect(events.at(-1)).toMatchObject({
      type: 'status',
      job: { uuid: job.uuid, status: 'completed', result_ready: true },
    });
    const statuses = events.filter((e) => e.type === 'status').map((e) => e.job.status);
    expect(statuses.at(-1)).toBe('completed');
    expect(new Set(statuses).size).toBe(statuses.length);
  });

  it('reconnects after a dropped connection without repeating a state', async () => {
    const job = await client.submit('test-sleep', { model: 'v1', input: { ms: 60_000 } });
    let calls = 0;
    const flaky: typeof fetch = async (input, init) => {
      calls++;
      if (calls === 1)
        throw new TypeError('fetch failed', {
          cause: Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }),
        });
      return fetch(input, init);
    };
    const c = new MediaJobsClient({ baseUrl: svc.base, apiKey: svc.key, fetch: flaky, retryDelayMs: 20 });
    const events: JobEvent[] = [];
    for await (const e of c.watch(job.uuid)) {
      events.push(e);
      if (events.length === 1) await client.cancel(job.uuid);
    }
    expect(calls).toBeGreaterThanOrEqual(2);
    expect(events.at(-1)!.job.status).toBe('cancelled');
  });

  it("throws the 404 of another owner's job", async () => {
    const job = await client.submit('test-sleep', { model: 'v1', input: { ms: 0 } });
    const bob = new MediaJobsClient({ baseUrl: svc.base, apiKey: await svc.newKey('bob') });
    const err = await collect(bob.watch(job.uuid)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MediaJobsError);
    expect(err).toMatchObject({ status: 404, message: 'job not found' });
  });
});
