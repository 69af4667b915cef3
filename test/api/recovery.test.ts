import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, spawnService, type ChildService } from '../helpers/child.js';
import { sleepJobType } from '../helpers/job-types.js';
import { startMediaServer, type MediaServer } from '../helpers/media-server.js';
import { storeEnv, TEST_DB } from '../helpers/db.js';
import { startService, waitFor, waitTerminal } from '../helpers/service.js';

let media: MediaServer;
const children: ChildService[] = [];
beforeAll(async () => {
  media = await startMediaServer();
});
afterAll(async () => {
  for (const c of children) if (c.proc.exitCode === null) await c.kill9();
  await media?.close();
});

const transform = (src: string) => ({
  job_type: 'image-transform',
  model: 'lanczos3',
  input: { source: src, width: 64 },
});

describe('crash recovery (real process, kill -9)', () => {
  it('picks up a job that was processing when the process died, and finishes it once', async () => {
    const base = await storeEnv();
    const dataDir = base.DATA_DIR!;
    const env = { ...base, JOB_LEASE: '2s', QUEUE_POLL_INTERVAL: '200ms' };
    const key = cli(['keys', 'create', '--owner', 'crash'], env).lastLine;
    expect(key).toMatch(/^mj_/);

    const first = await spawnService(env, key);
    children.push(first);
    const sub = await first.call('POST', '/api/v1/jobs/submit/image-transform', {
      body: transform(media.url('/hold/a.jpg')),
    });
    const uuid = sub.body.data.uuid;
    await waitFor(async () => {
      const s = (await first.call('GET', `/api/v1/jobs/${uuid}/status`)).body.data;
      return s.status === 'processing' && s.progress?.stage === 'downloading media';
    }, 'the job to be downloading');
    // Kill only once the request is on the wire, mid-download.
    await waitFor(() => media.requests.includes('/hold/a.jpg'), 'the download to start');
    await first.kill9();

    const second = await spawnService(env, key);
    children.push(second);
    // The dead worker's lease must lapse first; then the job is claimed again.
    await waitFor(() => media.requests.filter((r) => r === '/hold/a.jpg').length >= 2, 'the second attempt');
    media.release();
    const done = await waitTerminal(second.call, uuid);
    expect(done).toMatchObject({ status: 'completed', result_ready: true });

    const files = fs.readdirSync(path.join(dataDir, 'results')).filter((f) => f.startsWith(uuid));
    expect(files).toHaveLength(1);
    expect(files[0]).toBe(`${uuid}.2.jpg`);
    const res = await second.call('GET', `/api/v1/jobs/${uuid}/result`);
    const dl = await fetch(res.body.data.url);
    expect(dl.status).toBe(200);
    expect((await dl.arrayBuffer()).byteLength).toBe(res.body.data.size_bytes);
    // Graceful even with the client's keep-alive connections still open.
    expect(await second.term()).toBe(0);
  });

  it('fails a job whose worker died JOB_MAX_ATTEMPTS times with internal_error', async () => {
    const base = await storeEnv();
    const env = { ...base, JOB_LEASE: '1s', JOB_MAX_ATTEMPTS: '1', MAINTENANCE_INTERVAL: '300ms' };
    const key = cli(['keys', 'create', '--owner', 'crash'], env).lastLine;
    const first = await spawnService(env, key);
    children.push(first);
    const uuid = (
      await first.call('POST', '/api/v1/jobs/submit/image-transform', { body: transform(media.url('/hold/b.jpg')) })
    ).body.data.uuid;
    await waitFor(() => media.requests.includes('/hold/b.jpg'), 'the download to start');
    await first.kill9();
    const second = await spawnService(env, key);
    children.push(second);
    const done = await waitTerminal(second.call, uuid);
    expect(done).toMatchObject({ status: 'failed', error_type: 'internal_error' });
    expect(done.error_message).toMatch(/stopped responding/);
    await second.term();
    media.release();
  });

  it('hands running jobs back on SIGTERM after the grace period, losing nothing', async () => {
    const base = await storeEnv();
    const env = { ...base, SHUTDOWN_GRACE: '300ms', JOB_LEASE: '30s' };
    const key = cli(['keys', 'create', '--owner', 'term'], env).lastLine;
    const first = await spawnService(env, key);
    children.push(first);
    const uuid = (
      await first.call('POST', '/api/v1/jobs/submit/image-transform', { body: transform(media.url('/hold/c.jpg')) })
    ).body.data.uuid;
    await waitFor(() => media.requests.includes('/hold/c.jpg'), 'the download to start');
    expect(await first.term()).toBe(0);
    // Handed back at once (not after the 30 s lease): the next process runs it right away.
    const second = await spawnService(env, key);
    children.push(second);
    await waitFor(() => media.requests.filter((r) => r === '/hold/c.jpg').length >= 2, 'the job to be picked up again');
    media.release();
    expect(await waitTerminal(second.call, uuid)).toMatchObject({ status: 'completed' });
    await second.term();
  });
});

describe('JOB_TIMEOUT', () => {
  it('fails a job that runs too long with error_type timeout', async () => {
    const svc = await startService({ JOB_TIMEOUT: '500ms' }, { jobTypes: [sleepJobType()] });
    try {
      const r = await svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
        body: { job_type: 'test-sleep', model: 'v1', input: { ms: 60_000 } },
      });
      const done = await waitTerminal(svc.call, r.body.data.uuid);
      expect(done).toMatchObject({
        status: 'failed',
        error_type: 'timeout',
        error_message: 'job ran longer than the 500ms limit',
      });
    } finally {
      await svc.stop();
    }
  });
});

describe('CLI keys', () => {
  it('creates (key alone on the last line), lists without secrets, and revokes', async () => {
    const env = await storeEnv();
    const dataDir = env.DATA_DIR!;
    const created = cli(['keys', 'create', '--owner', 'acme'], env);
    expect(created.status).toBe(0);
    expect(created.lastLine).toMatch(/^mj_[A-Za-z0-9_-]{32}$/);
    const id = /created key (key_[0-9a-f]+)/.exec(created.stdout)![1]!;

    const listed = cli(['keys', 'list'], env);
    expect(listed.stdout).toContain(id);
    expect(listed.stdout).toContain('acme');
    expect(listed.stdout).not.toContain(created.lastLine);
    if (TEST_DB === 'sqlite') {
      // Stored hashed: the key itself is nowhere in the database file.
      const dbBytes = fs.readFileSync(path.join(dataDir, 'media-jobs.sqlite'));
      expect(dbBytes.includes(Buffer.from(created.lastLine))).toBe(false);
    }

    const svc = await spawnService(env, created.lastLine);
    children.push(svc);
    expect((await svc.call('GET', '/api/v1/job-types')).status).toBe(200);
    expect(cli(['keys', 'revoke', id], env).status).toBe(0);
    // The CLI is another process: the service's key cache hears of the revoke by NOTIFY on
    // PostgreSQL, and within its 5 s TTL at the latest (the documented revoke delay).
    await waitFor(
      async () => (await svc.call('GET', '/api/v1/job-types')).status === 401,
      'the revoked key to be refused',
      15_000,
    );
    expect((await svc.call('GET', '/api/v1/job-types')).status).toBe(401);
    expect(cli(['keys', 'list'], env).stdout).toMatch(/revoked/);
    await svc.term();

    const bad = cli(['keys', 'create'], env);
    expect(bad.status).toBe(1);
    expect(bad.stderr.trim()).toBe('media-jobs: keys create needs --owner NAME (1 to 200 characters)');
  });

  it('prints a key on first start and stops with one clear line on bad configuration', async () => {
    const bad = cli(['serve'], { ...(await storeEnv()), JOB_TIMEOUT: 'soon' });
    expect(bad.status).toBe(1);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
    expect(bad.stderr).toMatch(/^media-jobs: invalid configuration: JOB_TIMEOUT: "soon" is not a duration/);
  });
});
