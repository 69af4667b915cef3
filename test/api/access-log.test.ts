import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleepJobType } from '../helpers/job-types.js';
import { startService, waitFor, waitTerminal, type TestService } from '../helpers/service.js';

const lines: Array<Record<string, unknown>> = [];
const sink = new Writable({
  write(chunk, _enc, cb) {
    for (const l of String(chunk).split('\n')) if (l.trim()) lines.push(JSON.parse(l) as Record<string, unknown>);
    cb();
  },
});

let svc: TestService;
beforeAll(async () => {
  svc = await startService(
    { ACCESS_LOG_SAMPLE: '0' },
    { jobTypes: [sleepJobType()], log: pino({ level: 'info' }, sink) },
  );
});
afterAll(() => svc?.stop());

describe('ACCESS_LOG_SAMPLE=0', () => {
  it('logs no line for a successful request, still logs every error, and still counts both', async () => {
    const uuid = (
      await svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
        body: { job_type: 'test-sleep', model: 'v1', input: { ms: 1 } },
      })
    ).body.data.uuid as string;
    await waitTerminal(svc.call, uuid);
    const ok = await svc.call('GET', `/api/v1/jobs/${uuid}/status`, { headers: { 'x-request-id': 'sampled-out' } });
    expect(ok.status).toBe(200);
    const missing = await svc.call('GET', '/api/v1/jobs/00000000-0000-4000-8000-000000000000/status', {
      headers: { 'x-request-id': 'error-in' },
    });
    expect(missing.status).toBe(404);
    // Lines reach the sink in order: once the later error's line is there, the earlier one would be too.
    const line = await waitFor(
      () => lines.find((l) => l.request_id === 'error-in' && l.msg === 'request'),
      'the error request line',
    );
    expect(line).toMatchObject({ status: 404, route: '/api/v1/jobs/:uuid/status', method: 'GET' });
    expect(lines.filter((l) => l.request_id === 'sampled-out')).toEqual([]);
    const { text } = await svc.call('GET', '/metrics', { key: null });
    expect(text).toMatch(/method="GET",route="\/api\/v1\/jobs\/:uuid\/status",status_code="200"\} [1-9]/);
    expect(text).toMatch(/method="GET",route="\/api\/v1\/jobs\/:uuid\/status",status_code="404"\} [1-9]/);
  });
});
