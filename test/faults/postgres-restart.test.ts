import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, spawnService, type ChildService } from '../helpers/child.js';
import { startMediaServer, type MediaServer } from '../helpers/media-server.js';
import { pgBinDir, startPgCluster, type PgCluster } from '../helpers/pg-cluster.js';
import { tempDir, waitFor } from '../helpers/service.js';

/**
 * The database goes away under load: a fast restart (every connection terminated, 57P01), then a
 * crash stop for a few seconds. The service process must stay alive, answer 503 envelopes quickly
 * while the database is down, be ready again soon after it returns, and finish every job whose
 * submit was acknowledged.
 */
const bin = pgBinDir();
const required = process.env.REQUIRE_POSTGRES === 'true';
if (!bin && !required) console.log('PostgreSQL server binaries not found: skipping the database fault test');

describe.skipIf(!bin && !required)('PostgreSQL restart under submit load', () => {
  let cluster: PgCluster;
  let media: MediaServer;
  let svc: ChildService;
  beforeAll(async () => {
    cluster = await startPgCluster();
    media = await startMediaServer();
  }, 120_000);
  afterAll(async () => {
    if (svc && svc.proc.exitCode === null) await svc.kill9();
    await media?.close();
    cluster?.destroy();
  });

  it('stays alive, answers 503 while down, recovers, and loses no acknowledged job', async () => {
    const env = {
      DATABASE_URL: cluster.url,
      DATA_DIR: tempDir(),
      DATABASE_POOL_SIZE: '4',
      WORKER_CONCURRENCY: '2',
      JOB_LEASE: '3s',
      QUEUE_POLL_INTERVAL: '200ms',
      RATE_LIMIT_SUBMIT: '0',
      RATE_LIMIT_READ: '0',
    };
    const key = cli(['keys', 'create', '--owner', 'faults'], env).lastLine;
    expect(key).toMatch(/^mj_/);
    svc = await spawnService(env, key);
    const body = {
      job_type: 'image-transform',
      model: 'lanczos3',
      input: { source: media.url('/small.png'), width: 32 },
    };

    const acknowledged: string[] = [];
    const outage: Array<{ status: number; code: unknown; ms: number }> = [];
    let down = false;
    let stop = false;
    const load = Promise.all(
      Array.from({ length: 4 }, async () => {
        while (!stop) {
          const t = Date.now();
          try {
            const r = await svc.call('POST', '/api/v1/jobs/submit/image-transform', { body });
            if (r.status === 200) acknowledged.push(r.body.data.uuid);
            else if (down) outage.push({ status: r.status, code: r.body?.code, ms: Date.now() - t });
            else if (r.status !== 503) throw new Error(`unexpected ${r.status}: ${r.text}`);
          } catch (err) {
            if (svc.proc.exitCode !== null)
              throw new Error(`the service died:\n${svc.output().slice(-3000)}`, { cause: err });
            throw err;
          }
          await sleep(20);
        }
      }),
    );

    await waitFor(() => acknowledged.length >= 20, 'some jobs submitted before the restart', 60_000);
    cluster.restart();
    await waitFor(() => acknowledged.length >= 40, 'submits accepted again after the fast restart', 60_000);

    cluster.stopHard();
    down = true;
    await sleep(3_000);
    const ready = await svc.call('GET', '/readyz');
    expect(ready.status).toBe(503);
    expect(ready.body.code).toBe(-1);
    down = false;
    cluster.start();
    const back = Date.now();
    await waitFor(async () => (await svc.call('GET', '/readyz')).status === 200, '/readyz to answer 200 again', 30_000);
    const readyAfterMs = Date.now() - back;
    const before = acknowledged.length;
    await waitFor(() => acknowledged.length >= before + 20, 'submits accepted after the database came back', 60_000);
    stop = true;
    await load;

    expect(svc.proc.exitCode).toBeNull();
    // While down: every answer an envelope with 503, none hanging (bounded by the pool's connect timeout).
    expect(outage.length).toBeGreaterThan(0);
    for (const o of outage) {
      expect(o.status).toBe(503);
      expect(o.code).toBe(-1);
      expect(o.ms).toBeLessThan(15_000);
    }
    expect(readyAfterMs).toBeLessThan(30_000);

    // Every acknowledged job reaches a terminal state, and completes (the media server never failed).
    const unfinished = new Set(acknowledged);
    await waitFor(
      async () => {
        for (const uuid of [...unfinished]) {
          const r = await svc.call('GET', `/api/v1/jobs/${uuid}/status`);
          expect(r.status).toBe(200);
          if (['completed', 'failed', 'cancelled'].includes(r.body.data.status)) {
            expect(r.body.data.status).toBe('completed');
            unfinished.delete(uuid);
          }
        }
        return unfinished.size === 0;
      },
      'every acknowledged job to complete',
      120_000,
    );
    expect(svc.proc.exitCode).toBeNull();
  }, 300_000);
});
