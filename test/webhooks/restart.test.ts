import { afterAll, describe, expect, it } from 'vitest';
import { cli, spawnService, type ChildService } from '../helpers/child.js';
import { storeEnv } from '../helpers/db.js';
import { tempDir, waitFor } from '../helpers/service.js';
import { startReceiver, type Receiver } from './receiver.js';

const RETRY_MS = 5_000;

const children: ChildService[] = [];
let rx: Receiver | undefined;
afterAll(async () => {
  for (const c of children) if (c.proc.exitCode === null && c.proc.signalCode === null) await c.kill9();
  await rx?.close();
});

describe('a pending delivery survives kill -9 and a restart', () => {
  it('is retried after the restart with the same event id, on schedule', async () => {
    rx = await startReceiver((r) => {
      if (r.method !== 'POST') return 404; // the job's media URL: the job fails, job.failed is sent
      return rx!.requests.filter((q) => q.method === 'POST').length === 1 ? 500 : 200;
    });
    // A real `media-jobs serve` (from source, in a child process), so SIGKILL is a real crash.
    const env = {
      ...(await storeEnv(tempDir('mj-webhook-restart-'))),
      WEBHOOK_RETRY_SCHEDULE: `0,${RETRY_MS}ms,${RETRY_MS}ms,${RETRY_MS}ms,${RETRY_MS}ms`,
      QUEUE_POLL_INTERVAL: '200ms',
      WORKER_CONCURRENCY: '1',
    };
    const key = cli(['keys', 'create', '--owner', 't'], env).lastLine;
    expect(key).toMatch(/^mj_/);
    const start = async () => {
      const child = await spawnService(env, key);
      children.push(child);
      return child;
    };

    const first = await start();
    const sub = await first.call('POST', '/api/v1/jobs/submit/image-transform', {
      body: {
        job_type: 'image-transform',
        model: 'lanczos3',
        input: { source: rx.url('/missing.png') },
        webhook: { url: rx.url('/hook') },
      },
    });
    expect(sub.status, sub.text).toBe(200);
    const uuid = sub.body.data.uuid;

    // The first attempt fails (500) and its failure is on record: the retry is due in RETRY_MS.
    const pending = await waitFor(async () => {
      const d = (await first.call('GET', `/api/v1/jobs/${uuid}/webhook-deliveries`)).body.data?.deliveries?.[0];
      return d?.attempts.length === 1 ? d : undefined;
    }, 'the first attempt to be recorded');
    await first.kill9();
    const posts = () => rx!.requests.filter((q) => q.method === 'POST');
    expect(pending.state).toBe('pending');
    expect(pending.attempts[0]).toMatchObject({ http_status: 500, ok: false });
    // Killed before the retry was due (else this test proves nothing).
    expect(posts()).toHaveLength(1);
    const firstPost = posts()[0]!;

    const second = await start();
    await waitFor(() => posts().length >= 2, 'the retry after the restart', 45_000);
    const retry = posts()[1]!;
    expect(retry.headers['x-service-event-id']).toBe(firstPost.headers['x-service-event-id']);
    expect(retry.headers['x-service-event-id']).toBe(pending.event_id);
    expect(retry.raw.equals(firstPost.raw)).toBe(true);
    expect(retry.json()).toMatchObject({
      event_type: 'job.failed',
      job: { uuid, status: 'failed', error_type: 'media_fetch_failed' },
    });
    // The schedule held across the restart: not before RETRY_MS after the failure.
    expect(retry.at - firstPost.at).toBeGreaterThanOrEqual(RETRY_MS - 25);

    const done = await waitFor(async () => {
      const d = (await second.call('GET', `/api/v1/jobs/${uuid}/webhook-deliveries`)).body.data?.deliveries?.[0];
      return d?.state === 'delivered' ? d : undefined;
    }, 'the delivery to be recorded as delivered');
    expect(done.attempts.map((a: any) => a.http_status)).toEqual([500, 200]);
    expect(posts()).toHaveLength(2);

    expect(await second.term()).toBe(0);
  }, 150_000);
});
