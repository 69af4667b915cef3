/**
 * A worker process warms its job types at start (WORKER_WARMUP, default on): the face and video
 * types start their threads and load their models before the first job, so that job does not pay
 * for them. Test services turn it off (test/helpers/service.ts); these tests turn it on.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { JobType } from '../../src/processors/types.js';
import { sleepJobType } from '../helpers/job-types.js';
import { startService, waitFor, waitTerminal } from '../helpers/service.js';

function logSink() {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n')) if (l.trim()) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  return { lines, log: pino({ level: 'info' }, sink) };
}

/** The sleep type with a warm-up that counts its calls, or fails. */
function warmable(fail: boolean): JobType & { warmups: number } {
  const t = { ...sleepJobType(), warmups: 0 };
  t.warmup = () => {
    t.warmups++;
    return fail ? Promise.reject(new Error('no model here')) : Promise.resolve();
  };
  return t;
}

describe('warm-up at start', () => {
  it('warms the default face and video types once, in the background, and says so', async () => {
    const { lines, log } = logSink();
    const svc = await startService({ WORKER_WARMUP: 'true', WORKER_CONCURRENCY: '1' }, { log });
    try {
      // Answers at once: the warm-up does not hold the start.
      expect((await svc.call('GET', '/api/v1/job-types')).status).toBe(200);
      const line = await waitFor(() => lines.find((l) => l.msg === 'job types warmed'), 'the warm-up line', 120_000);
      expect(Object.keys(line.ms as object).sort()).toEqual(['face-detect', 'image-face-swap', 'video-face-swap']);
      expect(lines.filter((l) => l.msg === 'job types warmed')).toHaveLength(1);
      expect(lines.some((l) => String(l.msg).includes('warm-up failed'))).toBe(false);
    } finally {
      await svc.stop();
    }
  });

  it('a type that fails to warm is logged and still runs its jobs', async () => {
    const { lines, log } = logSink();
    const type = warmable(true);
    const svc = await startService({ WORKER_WARMUP: 'true' }, { jobTypes: [type], log });
    try {
      const warn = await waitFor(() => lines.find((l) => String(l.msg).includes('warm-up failed')), 'the warning');
      expect(warn.job_type).toBe('test-sleep');
      const r = await svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
        body: { job_type: 'test-sleep', model: 'v1', input: { ms: 1 } },
      });
      expect((await waitTerminal(svc.call, r.body.data.uuid)).status).toBe('completed');
      expect(type.warmups).toBe(1);
    } finally {
      await svc.stop();
    }
  });

  it('is not run by an API-only process, nor with WORKER_WARMUP=false', async () => {
    for (const [env, role] of [
      [{ WORKER_WARMUP: 'true' }, 'api'],
      [{ WORKER_WARMUP: 'false' }, 'all'],
    ] as const) {
      const type = warmable(false);
      const svc = await startService(env, { jobTypes: [type], role });
      try {
        // A job round trip (or, for the API process, a request) gives a started warm-up time to run.
        const r = await svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
          body: { job_type: 'test-sleep', model: 'v1', input: { ms: 1 } },
        });
        expect(r.status).toBe(200);
        if (role === 'all') await waitTerminal(svc.call, r.body.data.uuid);
        expect(type.warmups).toBe(0);
      } finally {
        await svc.stop();
      }
    }
  });
});
