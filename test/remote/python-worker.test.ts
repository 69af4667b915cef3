import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook } from '../../src/index.js';
import { createWorkerToken } from '../../src/store/worker-tokens.js';
import { startMediaServer, type MediaServer } from '../helpers/media-server.js';
import { startService, tempDir, waitFor, waitTerminal, type TestService } from '../helpers/service.js';
import { startReceiver, type Receiver } from '../webhooks/receiver.js';
import {
  alive,
  api,
  exited,
  perTestTypes,
  pidIn,
  sleeper,
  startWorkerProcess,
  stopIdle,
  WEBHOOK_SECRET,
  type WorkerProcess,
} from './worker-support.js';

/**
 * examples/python-worker/worker.py (standard library only) for real: a child process wrapping
 * real commands against a started service, over loopback HTTP.
 */
let svc: TestService;
let media: MediaServer;
let receiver: Receiver;
let token: string;
let client: ReturnType<typeof api>;
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  media = await startMediaServer();
  receiver = await startReceiver();
  svc = await startService({
    JOB_TYPES_FILE: perTestTypes(['py-e2e', 'py-fail', 'py-cancel', 'py-term']),
    JOB_LEASE: '2s',
    RATE_LIMIT_SUBMIT: '0',
    RATE_LIMIT_READ: '0',
  });
  token = (await createWorkerToken(svc.app.store.db, { name: 'python', jobTypes: null }, Date.now())).token;
  client = api(svc);
});
afterEach(async () => {
  for (const w of workers.splice(0)) {
    if (w.exitCode === null && w.signalCode === null) w.kill('SIGKILL');
    await exited(w);
  }
});
afterAll(async () => {
  await svc?.stop();
  await media?.close();
  await receiver?.close();
});

const start = (jobType: string, command: string[], extra: string[] = []) => {
  const w = startWorkerProcess('python', svc, token, jobType, command, extra);
  workers.push(w);
  return w;
};

describe('the Python reference worker', () => {
  it('serves a declared type end to end: staged media as files, placeholders, environment, result and webhook', async () => {
    const dir = tempDir('mj-py-e2e-');
    // The command writes its result and a copy for the test, and what it was given.
    const script = [
      'import json,os,shutil,sys',
      'src, out, inj, uuid = sys.argv[1:5]',
      `shutil.copyfile(src, out + '.jpg'); shutil.copyfile(src, ${JSON.stringify(path.join(dir, 'written.jpg'))})`,
      `json.dump({'argv': sys.argv[1:], 'env': {k: v for k, v in os.environ.items() if k.startswith('MJ_') or k.startswith('MEDIA_JOBS')}, 'input': json.load(open(inj))}, open(${JSON.stringify(path.join(dir, 'seen.json'))}, 'w'))`,
      "print('progress: 0.9 almost', flush=True)",
    ].join('\n');
    const w = start('py-e2e', ['python3', '-c', script, '{source}', '{output}', '{input_json}', '{uuid}']);
    const uuid = await client.submit('py-e2e', { source: media.url('/photo.jpg'), scale: 3 }, receiver.url('/py'));
    const done = await waitTerminal(svc.call, uuid);
    expect(done.status, w.log()).toBe('completed');

    const r = await client.result(uuid);
    expect(r.type).toBe('image/jpeg');
    expect(r.bytes.equals(fs.readFileSync(path.join(dir, 'written.jpg')))).toBe(true);
    const original = Buffer.from(await (await fetch(media.url('/photo.jpg'))).arrayBuffer());
    expect(r.bytes.equals(original)).toBe(true);

    const seen = JSON.parse(fs.readFileSync(path.join(dir, 'seen.json'), 'utf8'));
    const [src, out, inputJson, argUuid] = seen.argv as string[];
    expect(path.basename(src!)).toBe('source.jpg');
    expect(path.basename(out!)).toBe('output');
    expect(path.dirname(inputJson!)).toBe(path.dirname(src!));
    expect(argUuid).toBe(uuid);
    expect(seen.input).toEqual({ source: [src], scale: 3 });
    expect(seen.env).toMatchObject({
      MJ_JOB_UUID: uuid,
      MJ_JOB_TYPE: 'py-e2e',
      MJ_MODEL: 'v1',
      MJ_ATTEMPT: '1',
      MJ_SOURCE: src,
      MJ_OUTPUT: out,
      MJ_INPUT_JSON: inputJson,
      MJ_DIR: path.dirname(src!),
    });
    expect(JSON.parse(seen.env.MJ_OPTIONS)).toEqual({ scale: 3 });
    expect(seen.env.MEDIA_JOBS_WORKER_TOKEN).toBeUndefined(); // the command never sees the credential
    expect(fs.existsSync(path.dirname(src!))).toBe(false); // the job's directory is gone

    const hook = await waitFor(() => receiver.requests.find((q) => q.path === '/py'), 'the job.completed webhook');
    expect(verifyWebhook(hook.raw, hook.headers, WEBHOOK_SECRET)).toMatchObject({
      event_type: 'job.completed',
      job: { uuid, status: 'completed', result_ready: true },
    });
    await stopIdle(w);
  });

  it("fails with the command's stderr, and retries a job whose command exits 75", async () => {
    const w = start('py-fail', [
      'sh',
      '-c',
      'case "$MJ_OPTIONS" in *boom*) echo "model exploded" >&2; exit 3;; esac; [ "$MJ_ATTEMPT" = 1 ] && { echo "GPU busy" >&2; exit 75; }; echo "{\\"attempt\\": $MJ_ATTEMPT}" > "$MJ_OUTPUT"',
    ]);
    const bad = await client.submit('py-fail', { text: 'boom' });
    const failed = await waitTerminal(svc.call, bad);
    expect(failed, w.log()).toMatchObject({ status: 'failed', error_type: 'processing_error' });
    expect(failed.error_message).toContain('exited with code 3');
    expect(failed.error_message).toContain('model exploded');

    const retried = await client.submit('py-fail', { text: 'again' });
    expect((await waitTerminal(svc.call, retried)).status, w.log()).toBe('completed');
    expect(JSON.parse((await client.result(retried)).bytes.toString())).toEqual({ attempt: 2 });
    await stopIdle(w);
  });

  it('shows progress, and a cancel through the public API kills its command', async () => {
    const dir = tempDir('mj-py-cancel-');
    const w = start('py-cancel', sleeper(dir));
    const uuid = await client.submit('py-cancel', { text: 'cancel me' });
    const pid = await pidIn(path.join(dir, 'pid'));
    await waitFor(
      async () => (await client.status(uuid)).status_detail === 'sleeping (50%)',
      'the progress line in the status',
    );
    expect((await client.cancel(uuid)).status).toBe(200);
    await waitFor(() => !alive(pid), 'the command to be killed');
    expect((await client.status(uuid)).status, w.log()).toBe('cancelled');
    await stopIdle(w);
  });

  it('stops with exit status 1 when the service refuses its token', async () => {
    const w = startWorkerProcess('python', svc, 'mjw_revoked-or-wrong', 'py-e2e', ['true']);
    workers.push(w);
    await exited(w);
    expect(w.exitCode, w.log()).toBe(1);
    expect(w.log()).toContain('HTTP 401');
  });

  it('on SIGTERM hands its running job back (the attempt does not count) and exits 0', async () => {
    const dir = tempDir('mj-py-term-');
    const w = start('py-term', sleeper(dir), ['--grace', '200ms']);
    const uuid = await client.submit('py-term', { text: 'stop me' });
    const pid = await pidIn(path.join(dir, 'pid'));
    w.kill('SIGTERM');
    await exited(w);
    expect(w.exitCode, w.log()).toBe(0);
    expect(alive(pid)).toBe(false);
    expect(await client.status(uuid)).toMatchObject({ status: 'queued' });
    expect(await client.attempts(uuid)).toBe(0);
    await client.cancel(uuid);
  });
});
