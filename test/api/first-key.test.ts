import { afterAll, describe, expect, it } from 'vitest';
import { spawnService, type ChildService } from '../helpers/child.js';
import { storeEnv } from '../helpers/db.js';
import { client } from '../helpers/service.js';

/**
 * An empty database with an API and a worker process started together: the API process creates
 * and shows the first API key; the worker, whose terminal nobody watches, never prints one, and
 * its start-up line names the routes it serves (health, readiness, metrics), not the API.
 */
const children: ChildService[] = [];
afterAll(async () => {
  for (const c of children) if (c.proc.exitCode === null) await c.kill9();
});

const started = (out: string) =>
  out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .find((l) => l.msg === 'media-jobs started');

describe('the first API key', () => {
  it('is created and shown by the API process only, never by a worker', async () => {
    const env = { ...(await storeEnv()), LOG_LEVEL: 'info' };
    const [api, worker] = await Promise.all([
      spawnService(env, 'no key yet', { role: 'api', readyPath: '/readyz' }),
      spawnService(env, 'no key yet', { role: 'worker' }),
    ]);
    children.push(api, worker);

    const keys = api.output().match(/^mj_\S+$/gm) ?? [];
    expect(keys, api.output()).toHaveLength(1);
    expect(api.output()).toContain('No API key existed, so one was created for owner "default"');
    const jobs = await client(api.base, keys[0])('GET', '/api/v1/jobs');
    expect(jobs.status).toBe(200);

    expect(worker.output()).not.toMatch(/mj_|API key/);
    const line = started(worker.output());
    expect(line, worker.output()).toMatchObject({
      role: 'worker',
      serves: [
        `${worker.base.replace('127.0.0.1', 'localhost')}/healthz`,
        expect.stringMatching(/\/readyz$/),
        expect.stringMatching(/\/metrics$/),
      ],
    });
    expect(JSON.stringify(line)).not.toContain('/api/v1');
    expect(started(api.output())).toMatchObject({ role: 'api', url: expect.stringMatching(/\/api\/v1$/) });
  });
});
