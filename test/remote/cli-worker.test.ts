import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { parseProgress, runWorkerCommand } from '../../src/cli/worker.js';
import { createWorkerToken } from '../../src/store/worker-tokens.js';
import { cli } from '../helpers/child.js';
import { startMediaServer, type MediaServer } from '../helpers/media-server.js';
import { startService, tempDir, waitFor, waitTerminal, type TestService } from '../helpers/service.js';
import {
  alive,
  api,
  exited,
  perTestTypes,
  pidIn,
  sleeper,
  startWorkerProcess,
  stopIdle,
  type WorkerProcess,
} from './worker-support.js';

/**
 * `media-jobs worker -- COMMAND` for real: the CLI (from source) as a child process wrapping real
 * commands against a started service, killed and stopped the ways a GPU box is.
 */
let svc: TestService;
let media: MediaServer;
let token: string;
let client: ReturnType<typeof api>;
const workers: WorkerProcess[] = [];
const strays: number[] = [];

beforeAll(async () => {
  media = await startMediaServer();
  svc = await startService({
    JOB_TYPES_FILE: perTestTypes(['cli-e2e', 'cli-cancel', 'cli-kill', 'cli-term']),
    JOB_LEASE: '2s',
    RATE_LIMIT_SUBMIT: '0',
    RATE_LIMIT_READ: '0',
  });
  token = (await createWorkerToken(svc.app.store.db, { name: 'cli', jobTypes: null }, Date.now())).token;
  client = api(svc);
});
afterEach(async () => {
  for (const w of workers.splice(0)) {
    if (w.exitCode === null && w.signalCode === null) w.kill('SIGKILL');
    await exited(w);
  }
  for (const pid of strays.splice(0)) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
});
afterAll(async () => {
  await svc?.stop();
  await media?.close();
});

const start = (jobType: string, command: string[], extra: string[] = []) => {
  const w = startWorkerProcess('cli', svc, token, jobType, command, extra);
  workers.push(w);
  return w;
};

describe('media-jobs worker -- COMMAND', () => {
  it("completes with the output file (the bytes the command wrote), and fails with the command's stderr", async () => {
    const dir = tempDir('mj-cli-e2e-');
    const w = start('cli-e2e', [
      'sh',
      '-c',
      // $0 is {source}: the placeholder and MJ_SOURCE agree; the token never reaches the command.
      `[ "$0" = "$MJ_SOURCE" ] || exit 9; [ -z "$MEDIA_JOBS_WORKER_TOKEN" ] || exit 8
       case "$MJ_OPTIONS" in *'"scale":1'*) echo "model exploded" >&2; exit 3;; esac
       echo "progress: 0.3 copying"; cp "$MJ_SOURCE" "$1.jpg"; cp "$1.jpg" ${dir}/written.jpg`,
      '{source}',
      '{output}',
    ]);
    const ok = await client.submit('cli-e2e', { source: media.url('/photo.jpg') });
    expect((await waitTerminal(svc.call, ok)).status, w.log()).toBe('completed');
    const r = await client.result(ok);
    expect(r.type).toBe('image/jpeg');
    expect(r.bytes.equals(fs.readFileSync(path.join(dir, 'written.jpg')))).toBe(true);

    const bad = await client.submit('cli-e2e', { source: media.url('/photo.jpg'), scale: 1 });
    const failed = await waitTerminal(svc.call, bad);
    expect(failed, w.log()).toMatchObject({ status: 'failed', error_type: 'processing_error' });
    expect(failed.error_message).toContain('exited with code 3');
    expect(failed.error_message).toContain('model exploded');
    await stopIdle(w);
  });

  it("a cancel through the public API kills the command's whole process group", async () => {
    const dir = tempDir('mj-cli-cancel-');
    // A background grandchild in the same group, as a model's helper process would be.
    const w = start('cli-cancel', ['sh', '-c', `sleep 600 & echo $! > ${dir}/bg; exec "$@"`, 'sh', ...sleeper(dir)]);
    const uuid = await client.submit('cli-cancel', { text: 'cancel me' });
    const pid = await pidIn(path.join(dir, 'pid'));
    const bg = await pidIn(path.join(dir, 'bg'), 'the background process');
    strays.push(pid);
    await waitFor(
      async () => (await client.status(uuid)).status_detail === 'sleeping (50%)',
      'the progress line in the status',
    );
    expect((await client.cancel(uuid)).status).toBe(200);
    await waitFor(() => !alive(pid) && !alive(bg), 'the command and its background process to be killed');
    expect((await client.status(uuid)).status, w.log()).toBe('cancelled');
    await stopIdle(w);
  });

  it('a worker killed with SIGKILL mid-job: the lease expires and another worker runs attempt 2', async () => {
    const dir = tempDir('mj-cli-kill-');
    const first = start('cli-kill', sleeper(dir));
    const uuid = await client.submit('cli-kill', { text: 'long' });
    const pid = await pidIn(path.join(dir, 'pid'));
    strays.push(pid);
    first.kill('SIGKILL');
    await exited(first);
    process.kill(-pid, 'SIGKILL'); // its orphaned command: a killed worker cannot clean up
    await waitFor(async () => (await client.status(uuid)).status === 'queued', 'the lease to expire', 45_000);
    const second = start('cli-kill', ['sh', '-c', 'echo "{\\"attempt\\": $MJ_ATTEMPT}" > "$MJ_OUTPUT"']);
    expect((await waitTerminal(svc.call, uuid)).status, second.log()).toBe('completed');
    expect(JSON.parse((await client.result(uuid)).bytes.toString())).toEqual({ attempt: 2 });
    await stopIdle(second);
  });

  it('on SIGTERM hands its running job back (the attempt does not count) and exits 0', async () => {
    const dir = tempDir('mj-cli-term-');
    const w = start('cli-term', sleeper(dir), ['--grace', '200ms']);
    const uuid = await client.submit('cli-term', { text: 'stop me' });
    const pid = await pidIn(path.join(dir, 'pid'));
    strays.push(pid);
    w.kill('SIGTERM');
    await exited(w);
    expect(w.exitCode, w.log()).toBe(0);
    expect(alive(pid)).toBe(false);
    expect(await client.status(uuid)).toMatchObject({ status: 'queued' });
    expect(await client.attempts(uuid)).toBe(0);
    await client.cancel(uuid);
  });

  it('explains bad usage in one line and exits 2', async () => {
    const r = cli(['worker', '--job-type', 'x'], { MEDIA_JOBS_URL: svc.base });
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toContain('give the command to run after "--"');

    const lines: string[] = [];
    const spy = vi.spyOn(process.stderr, 'write').mockImplementation((s) => (lines.push(String(s)), true));
    try {
      const env = { MEDIA_JOBS_URL: svc.base, MEDIA_JOBS_WORKER_TOKEN: 'mjw_x', PATH: process.env.PATH };
      expect(await runWorkerCommand(['--', 'true'], env)).toBe(2);
      expect(await runWorkerCommand(['--job-type', 'x', '--concurrency', '0', '--', 'true'], env)).toBe(2);
      expect(await runWorkerCommand(['--job-type', 'x', '--grace', 'soon', '--', 'true'], env)).toBe(2);
      expect(await runWorkerCommand(['--job-type', 'x', '--', 'no-such-command-here'], env)).toBe(2);
      expect(await runWorkerCommand(['--job-type', 'x', '--', 'true'], { ...env, MEDIA_JOBS_WORKER_TOKEN: '' })).toBe(
        2,
      );
    } finally {
      spy.mockRestore();
    }
    expect(lines).toHaveLength(5);
    expect(lines.join('')).toMatch(
      /--job-type NAME is required[^\n]*\n.*--concurrency must be[^\n]*\n.*--grace:[^\n]*\n.*cannot run "no-such-command-here"[^\n]*\n.*--token/s,
    );
  });
});

describe('progress lines', () => {
  it('take a leading fraction only when it is one', () => {
    expect(parseProgress('progress: 0.42 denoising')).toEqual({ text: 'denoising', fraction: 0.42 });
    expect(parseProgress('  Progress: denoising  ')).toEqual({ text: 'denoising' });
    expect(parseProgress('progress: 1')).toEqual({ text: 'processing', fraction: 1 });
    expect(parseProgress('progress: 3 files left')).toEqual({ text: '3 files left' });
    expect(parseProgress('step 3 of 10')).toBeUndefined();
  });
});
