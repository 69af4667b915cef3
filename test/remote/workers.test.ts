import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createWorkerToken } from '../../src/store/worker-tokens.js';
import { runWorker, WorkerJobError, type RemoteWorker } from '../../src/worker-sdk/index.js';
import { cli } from '../helpers/child.js';
import { startMediaServer, type MediaServer } from '../helpers/media-server.js';
import { startService, tempDir, waitFor, waitTerminal, type TestService } from '../helpers/service.js';
import { declaredTypesFile } from './support.js';

/**
 * The clients of the remote worker protocol, for real: the TypeScript SDK in this process, the
 * `media-jobs worker -- COMMAND` CLI and the standard-library Python worker as child processes
 * wrapping real commands, against a started service.
 */
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const PY_WORKER = path.join(root, 'examples/python-worker/worker.py');

let svc: TestService;
let media: MediaServer;
let token: string;
const children: ChildProcess[] = [];
const sdkWorkers: RemoteWorker[] = [];

beforeAll(async () => {
  media = await startMediaServer();
  svc = await startService({ JOB_TYPES_FILE: declaredTypesFile(), JOB_LEASE: '2s', RATE_LIMIT_SUBMIT: '0', RATE_LIMIT_READ: '0' });
  token = (await createWorkerToken(svc.app.store.db, { name: 'tests', jobTypes: null }, Date.now())).token;
});
afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await Promise.all(sdkWorkers.splice(0).map((w) => w.stop(0)));
});
afterAll(async () => {
  await svc?.stop();
  await media?.close();
});

const submit = async (jobType: string, input: Record<string, unknown>) => {
  const r = await svc.call('POST', `/api/v1/jobs/submit/${jobType}`, { body: { job_type: jobType, model: 'v1', input } });
  expect(r.status, r.text).toBe(200);
  return r.body.data.uuid as string;
};
const status = async (uuid: string) => (await svc.call('GET', `/api/v1/jobs/${uuid}/status`)).body.data;
const result = async (uuid: string) => {
  const link = await svc.call('GET', `/api/v1/jobs/${uuid}/result`);
  expect(link.status, link.text).toBe(200);
  const res = await fetch(link.body.data.url);
  return { type: link.body.data.content_type as string, bytes: Buffer.from(await res.arrayBuffer()) };
};

/** A worker process (the CLI from source, or the Python one); its output is kept for failures. */
function startWorker(kind: 'cli' | 'python', jobType: string, command: string[], extra: string[] = []): ChildProcess & { log: () => string } {
  const args =
    kind === 'cli'
      ? ['--import', 'tsx', path.join(root, 'src/main.ts'), 'worker', '--job-type', jobType, ...extra, '--', ...command]
      : [PY_WORKER, '--job-type', jobType, ...extra, '--', ...command];
  const proc = spawn(kind === 'cli' ? process.execPath : 'python3', args, {
    cwd: root,
    env: { ...process.env, MEDIA_JOBS_URL: svc.base, MEDIA_JOBS_WORKER_TOKEN: token },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (d) => (out += d));
  proc.stderr!.on('data', (d) => (out += d));
  children.push(proc);
  return Object.assign(proc, { log: () => out });
}

const exited = (p: ChildProcess) => (p.exitCode !== null || p.signalCode !== null ? Promise.resolve() : new Promise<void>((r) => p.once('exit', () => r())));
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** A command that writes its pid, says where it is, then sleeps (until killed). */
function sleeper(dir: string): string[] {
  return ['python3', '-c', `import os,time,sys; open(${JSON.stringify(path.join(dir, 'pid'))},'w').write(str(os.getpid())); print('progress: 0.5 sleeping', flush=True); time.sleep(600)`];
}

describe('the Python reference worker', () => {
  it('serves a declared type end to end, wrapping a command with the options in its environment', async () => {
    const w = startWorker('python', 'test-remote-b', [
      'python3',
      '-c',
      "import json,os; o=json.loads(os.environ['MJ_OPTIONS']); json.dump({'upper': o['text'].upper(), 'model': os.environ['MJ_MODEL']}, open(os.environ['MJ_OUTPUT']+'.json','w'))",
    ]);
    const uuid = await submit('test-remote-b', { text: 'hello' });
    const done = await waitTerminal(svc.call, uuid);
    expect(done.status, w.log()).toBe('completed');
    const r = await result(uuid);
    expect(r.type).toBe('application/json');
    expect(JSON.parse(r.bytes.toString())).toEqual({ upper: 'HELLO', model: 'v1' });
    w.kill('SIGTERM');
    await exited(w);
  });

  it('passes staged media as files, and a cancel kills its command', async () => {
    const dir = tempDir('mj-py-');
    const w = startWorker('python', 'test-remote', ['sh', '-c', `cp "$0" ${dir}/seen.jpg; exec "$@"`, '{source}', ...sleeper(dir)]);
    const uuid = await submit('test-remote', { source: media.url('/photo.jpg') });
    const pid = Number(await waitFor(() => fs.existsSync(path.join(dir, 'pid')) && fs.readFileSync(path.join(dir, 'pid'), 'utf8'), 'the command to start'));
    const original = Buffer.from(await (await fetch(media.url('/photo.jpg'))).arrayBuffer());
    expect(fs.readFileSync(path.join(dir, 'seen.jpg')).equals(original)).toBe(true);
    await waitFor(async () => (await status(uuid)).status_detail === 'sleeping (50%)', 'the progress line in the status');
    expect((await svc.call('POST', `/api/v1/jobs/${uuid}/cancel`)).status).toBe(200);
    await waitFor(() => !alive(pid), 'the command to be killed', 30_000);
    expect((await status(uuid)).status, w.log()).toBe('cancelled');
    w.kill('SIGTERM');
    await exited(w);
  });
});

describe('media-jobs worker -- COMMAND', () => {
  it('completes with the output file, and fails with the command\'s stderr', async () => {
    const w = startWorker('cli', 'test-remote', ['sh', '-c', 'case "$MJ_OPTIONS" in *\'"scale":1\'*) echo "model exploded" >&2; exit 3;; esac; cp "$MJ_SOURCE" {output}.jpg']);
    const ok = await submit('test-remote', { source: media.url('/photo.jpg') });
    expect((await waitTerminal(svc.call, ok)).status, w.log()).toBe('completed');
    const original = Buffer.from(await (await fetch(media.url('/photo.jpg'))).arrayBuffer());
    const r = await result(ok);
    expect(r.type).toBe('image/jpeg');
    expect(r.bytes.equals(original)).toBe(true);

    const bad = await submit('test-remote', { source: media.url('/photo.jpg'), scale: 1 });
    const failed = await waitTerminal(svc.call, bad);
    expect(failed).toMatchObject({ status: 'failed', error_type: 'processing_error' });
    expect(failed.error_message).toContain('exited with code 3');
    expect(failed.error_message).toContain('model exploded');
    w.kill('SIGTERM');
    await exited(w);
  });

  it('a worker killed with SIGKILL mid-job: the lease expires and another worker runs attempt 2', async () => {
    const dir = tempDir('mj-kill-');
    const first = startWorker('cli', 'test-remote-b', sleeper(dir));
    const uuid = await submit('test-remote-b', { text: 'long' });
    const pid = Number(await waitFor(() => fs.existsSync(path.join(dir, 'pid')) && fs.readFileSync(path.join(dir, 'pid'), 'utf8'), 'the first command'));
    first.kill('SIGKILL');
    await exited(first);
    process.kill(-pid, 'SIGKILL'); // its orphaned command (a killed worker cannot clean up)
    await waitFor(async () => (await status(uuid)).status === 'queued', 'the lease to expire', 60_000);
    const second = startWorker('cli', 'test-remote-b', ['sh', '-c', 'echo "{\\"attempt\\": $MJ_ATTEMPT}" > "$MJ_OUTPUT"']);
    expect((await waitTerminal(svc.call, uuid)).status, second.log()).toBe('completed');
    expect(JSON.parse((await result(uuid)).bytes.toString())).toEqual({ attempt: 2 });
    second.kill('SIGTERM');
    await exited(second);
  }, 90_000);

  it('on SIGTERM hands its running job back (the attempt does not count) and exits 0', async () => {
    const dir = tempDir('mj-term-');
    const w = startWorker('cli', 'test-remote-b', sleeper(dir), ['--grace', '200ms']);
    const uuid = await submit('test-remote-b', { text: 'stop me' });
    const pid = Number(await waitFor(() => fs.existsSync(path.join(dir, 'pid')) && fs.readFileSync(path.join(dir, 'pid'), 'utf8'), 'the command'));
    w.kill('SIGTERM');
    await exited(w);
    expect(w.exitCode, w.log()).toBe(0);
    expect(alive(pid)).toBe(false);
    expect(await status(uuid)).toMatchObject({ status: 'queued' });
    const row = await svc.app.store.db.selectFrom('jobs').select('attempts').where('uuid', '=', uuid).executeTakeFirstOrThrow();
    expect(Number(row.attempts)).toBe(0);
    await svc.call('POST', `/api/v1/jobs/${uuid}/cancel`);
  });

  it('explains bad usage in one line and exits 2', () => {
    const r = cli(['worker', '--job-type', 'x'], { MEDIA_JOBS_URL: svc.base });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('give the command to run after "--"');
  });
});

describe('the TypeScript SDK (media-jobs/worker)', () => {
  it('runs the handler with progress, uploads its output, and maps a WorkerJobError and a cancel', async () => {
    const seen: string[] = [];
    let cancelled = false;
    const worker = runWorker({
      url: svc.base,
      token,
      jobTypes: ['test-remote'],
      concurrency: 2,
      waitSeconds: 2,
      handle: async (job, ctx) => {
        seen.push(job.uuid);
        const { bytes } = await ctx.download(job.media.source![0]!);
        const meta = await sharp(bytes).metadata();
        if (meta.width === 64) throw new WorkerJobError('invalid_media', 'too small to upscale');
        if (job.input.scale === 4) {
          ctx.progress('waiting to be cancelled', 0.25);
          await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
          cancelled = true;
          throw ctx.signal.reason;
        }
        ctx.progress('upscaling', 0.5);
        const out = await sharp(bytes).resize({ width: meta.width! * (job.input.scale as number) }).png().toBuffer();
        return { bytes: out, contentType: 'image/png' };
      },
    });
    sdkWorkers.push(worker);
    const good = await submit('test-remote', { source: media.url('/photo.jpg'), scale: 2 });
    const small = await submit('test-remote', { source: media.url('/small.png') });
    const toCancel = await submit('test-remote', { source: media.url('/photo.jpg'), scale: 4 });

    expect((await waitTerminal(svc.call, good)).status).toBe('completed');
    const r = await result(good);
    expect(r.type).toBe('image/png');
    expect((await sharp(r.bytes).metadata()).width).toBe(1600);
    expect(await waitTerminal(svc.call, small)).toMatchObject({ status: 'failed', error_type: 'invalid_media', error_message: 'too small to upscale' });

    await waitFor(async () => (await status(toCancel)).status_detail === 'waiting to be cancelled (25%)', 'the progress of the third job');
    await svc.call('POST', `/api/v1/jobs/${toCancel}/cancel`);
    await waitFor(() => cancelled, 'the handler to see the cancel');
    expect(seen).toEqual(expect.arrayContaining([good, small, toCancel]));
    await worker.stop(1_000);
    expect(worker.active).toBe(0);
  });

  it('stops with an error when the service refuses its token', async () => {
    const worker = runWorker({ url: svc.base, token: 'mjw_revoked-or-wrong', jobTypes: ['test-remote'], handle: async () => ({ bytes: Buffer.from('x'), contentType: 'text/plain' }) });
    await expect(worker.done).rejects.toThrow(/401/);
  });
});
