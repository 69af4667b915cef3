import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook } from '../../src/index.js';
import { createWorkerToken } from '../../src/store/worker-tokens.js';
import { ERROR_TYPES as SERVICE_ERROR_TYPES } from '../../src/contract/api.js';
import {
  ERROR_TYPES,
  runWorker,
  WorkerJobError,
  type RemoteWorker,
  type RunWorkerOptions,
} from '../../src/worker-sdk/index.js';
import { startMediaServer, type MediaServer } from '../helpers/media-server.js';
import { startService, waitFor, waitTerminal, type TestService } from '../helpers/service.js';
import { startReceiver, type Receiver } from '../webhooks/receiver.js';
import { api, perTestTypes, WEBHOOK_SECRET } from './worker-support.js';

/** The TypeScript SDK (`media-jobs/worker`) in this process, against a started service over loopback HTTP. */
let svc: TestService;
let media: MediaServer;
let receiver: Receiver;
let token: string;
let client: ReturnType<typeof api>;
const running: RemoteWorker[] = [];
const LEASE_MS = 2_000;

beforeAll(async () => {
  media = await startMediaServer();
  receiver = await startReceiver();
  svc = await startService({
    JOB_TYPES_FILE: perTestTypes([
      'sdk-e2e',
      'sdk-errors',
      'sdk-lease',
      'sdk-503',
      'sdk-idle',
      'sdk-grace',
      'sdk-token',
    ]),
    JOB_LEASE: `${LEASE_MS}ms`,
    RATE_LIMIT_SUBMIT: '0',
    RATE_LIMIT_READ: '0',
  });
  token = (await createWorkerToken(svc.app.store.db, { name: 'sdk', jobTypes: null }, Date.now())).token;
  client = api(svc);
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((w) => w.stop(0)));
});
afterAll(async () => {
  await svc?.stop();
  await media?.close();
  await receiver?.close();
});

function start(
  opts: Partial<RunWorkerOptions> & Pick<RunWorkerOptions, 'handle' | 'jobTypes'>,
): RemoteWorker & { logs: string[] } {
  const logs: string[] = [];
  const worker = runWorker({
    url: svc.base,
    token,
    waitSeconds: 5,
    log: (m, f) => logs.push(`${m} ${JSON.stringify(f ?? {})}`),
    ...opts,
  });
  running.push(worker);
  return Object.assign(worker, { logs });
}

/** A raw claim, as another worker would make it (0 s wait): the job it gets, if any. */
async function rawClaim(jobTypes: string[]): Promise<any> {
  const r = await svc.call('POST', '/api/v1/worker/claim', { key: token, body: { job_types: jobTypes, wait: 0 } });
  expect(r.status, r.text).toBe(200);
  return r.body.data.job;
}

describe('runWorker', () => {
  it('runs the handler with progress and uploads its output; the client gets the result and its webhook', async () => {
    let returned: Buffer | undefined;
    let sawProgress = false;
    const worker = start({
      jobTypes: ['sdk-e2e'],
      concurrency: 2,
      handle: async (job, ctx) => {
        const { bytes, contentType } = await ctx.download(job.media.source![0]!);
        expect(contentType).toBe('image/jpeg');
        const meta = await sharp(bytes).metadata();
        ctx.progress('upscaling', 0.5);
        // Held until the progress is visible in the public status (it is sent at once, not on the next beat).
        await waitFor(() => sawProgress, 'the test to see the progress');
        returned = await sharp(bytes)
          .resize({ width: meta.width * (job.input.scale as number) })
          .png()
          .toBuffer();
        return { bytes: returned, contentType: 'image/png' };
      },
    });
    const uuid = await client.submit('sdk-e2e', { source: media.url('/photo.jpg'), scale: 2 }, receiver.url('/sdk'));
    await waitFor(
      async () => (await client.status(uuid)).status_detail === 'upscaling (50%)',
      'the progress in the status',
    );
    sawProgress = true;
    expect((await waitTerminal(svc.call, uuid)).status, worker.logs.join('\n')).toBe('completed');
    const r = await client.result(uuid);
    expect(r.type).toBe('image/png');
    expect(r.bytes.equals(returned!)).toBe(true);
    const hook = await waitFor(() => receiver.requests.find((q) => q.path === '/sdk'), 'the job.completed webhook');
    expect(verifyWebhook(hook.raw, hook.headers, WEBHOOK_SECRET)).toMatchObject({
      event_type: 'job.completed',
      job: { uuid, status: 'completed' },
    });
  });

  it("fails with a WorkerJobError's type, any other error as processing_error, and aborts a cancelled job", async () => {
    let cancelled: unknown;
    start({
      jobTypes: ['sdk-errors'],
      concurrency: 3,
      handle: async (job, ctx) => {
        const text = job.input.text as string;
        if (text === 'small') throw new WorkerJobError('invalid_media', 'too small to upscale');
        if (text === 'crash') throw new Error('x'.repeat(3000));
        ctx.progress('waiting to be cancelled');
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
        cancelled = ctx.signal.reason;
        throw ctx.signal.reason;
      },
    });
    const small = await client.submit('sdk-errors', { text: 'small' });
    const crash = await client.submit('sdk-errors', { text: 'crash' });
    const toCancel = await client.submit('sdk-errors', { text: 'cancel' });
    expect(await waitTerminal(svc.call, small)).toMatchObject({
      status: 'failed',
      error_type: 'invalid_media',
      error_message: 'too small to upscale',
    });
    const crashed = await waitTerminal(svc.call, crash);
    expect(crashed).toMatchObject({ status: 'failed', error_type: 'processing_error' });
    expect(crashed.error_message).toBe('x'.repeat(1000));

    await waitFor(
      async () => (await client.status(toCancel)).status_detail === 'waiting to be cancelled',
      'the third job to run',
    );
    await client.cancel(toCancel);
    await waitFor(() => cancelled, 'the handler to see the cancel');
    expect((cancelled as Error).name).toBe('AbortError');
    expect((await client.status(toCancel)).status).toBe('cancelled');
  });

  it('keeps a job past its lease with heartbeats (one attempt, one run)', async () => {
    let runs = 0;
    const worker = start({
      jobTypes: ['sdk-lease'],
      handle: async () => {
        runs++;
        await new Promise((r) => setTimeout(r, LEASE_MS * 1.75));
        return { bytes: Buffer.from('{"ok":true}'), contentType: 'application/json' };
      },
    });
    const uuid = await client.submit('sdk-lease', { text: 'slow' });
    expect((await waitTerminal(svc.call, uuid)).status, worker.logs.join('\n')).toBe('completed');
    expect(runs).toBe(1);
    expect(await client.attempts(uuid)).toBe(1);
  });

  it('backs off and retries when the service answers 503, and never gives up', async () => {
    // A proxy in front of the service that answers the first three claims with 503.
    let refused = 0;
    // eslint-disable-next-line @typescript-eslint/no-misused-promises -- a test proxy: its handler's rejections fail the test anyway
    const proxy: Server = createServer(async (req, res) => {
      if (req.url === '/api/v1/worker/claim' && refused < 3) {
        refused++;
        res.writeHead(503, { 'content-type': 'application/json' }).end('{"code":-1,"message":"unavailable"}');
        return;
      }
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      // A worker hanging up hangs up the proxied call too, or its long poll would outlive it.
      const gone = new AbortController();
      res.on('close', () => gone.abort());
      try {
        const up = await fetch(`${svc.base}${req.url}`, {
          method: req.method,
          headers: req.headers as Record<string, string>,
          body: chunks.length ? Buffer.concat(chunks) : undefined,
          signal: gone.signal,
        });
        res
          .writeHead(up.status, { 'content-type': up.headers.get('content-type') ?? 'application/json' })
          .end(Buffer.from(await up.arrayBuffer()));
      } catch {
        res.destroy();
      }
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    try {
      const worker = start({
        url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
        jobTypes: ['sdk-503'],
        handle: async () => ({ bytes: Buffer.from('retried'), contentType: 'text/plain' }),
      });
      const uuid = await client.submit('sdk-503', { text: 'through the proxy' });
      expect((await waitTerminal(svc.call, uuid)).status, worker.logs.join('\n')).toBe('completed');
      expect(refused).toBe(3);
      expect(worker.logs.filter((l) => l.startsWith('claim failed; retrying'))).toHaveLength(3);
      expect((await client.result(uuid)).bytes.toString()).toBe('retried');
      await worker.stop(0);
      await expect(worker.done).resolves.toBeUndefined();
    } finally {
      proxy.closeAllConnections();
      await new Promise((r) => proxy.close(r));
    }
  });

  it('stop() abandons an idle long poll at once: a job submitted afterwards waits for another worker', async () => {
    const remote = svc.app.remote;
    const worker = start({
      jobTypes: ['sdk-idle'],
      waitSeconds: 30,
      handle: async () => ({ bytes: Buffer.from('no'), contentType: 'text/plain' }),
    });
    await waitFor(() => remote.waitingClaims > 0, 'the long poll to reach the service');
    const stopping = Date.now();
    await worker.stop();
    // Generous: a poll left to run would have held stop() for its whole 30 s wait.
    expect(Date.now() - stopping).toBeLessThan(20_000);
    await expect(worker.done).resolves.toBeUndefined();
    // The service sees the hang-up a moment after the worker made it; a job queued in between
    // would go to the dead poll (see the report to the service's side), so wait for it to notice.
    await waitFor(() => remote.waitingClaims === 0, 'the service to see the poll end');
    const uuid = await client.submit('sdk-idle', { text: 'after the stop' });
    const job = await waitFor(() => rawClaim(['sdk-idle']), 'another worker to claim the job');
    expect(job).toMatchObject({ uuid, attempt: 1 });
    await svc.call('POST', `/api/v1/worker/jobs/${uuid}/release`, {
      key: token,
      body: { lease_token: job.lease_token },
    });
    await client.cancel(uuid);
  });

  it('stop(grace): a job still running after the grace is aborted and handed back, the attempt not counted', async () => {
    let reason: unknown;
    const worker = start({
      jobTypes: ['sdk-grace'],
      handle: async (_job, ctx) => {
        ctx.progress('busy');
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
        reason = ctx.signal.reason;
        throw ctx.signal.reason;
      },
    });
    const uuid = await client.submit('sdk-grace', { text: 'stop me' });
    await waitFor(async () => (await client.status(uuid)).status_detail === 'busy', 'the job to run');
    await worker.stop(200);
    expect((reason as Error).message).toContain('stop');
    expect(worker.active).toBe(0);
    expect(await client.status(uuid)).toMatchObject({ status: 'queued' });
    expect(await client.attempts(uuid)).toBe(0);
    await client.cancel(uuid);
  });

  it("knows the service's error types (it keeps its own copy, so as to load none of the service)", () => {
    expect(ERROR_TYPES).toEqual(SERVICE_ERROR_TYPES);
    expect(() => new WorkerJobError('oops' as never, 'x')).toThrow(/error_type must be one of/);
  });

  it('stops with an error when the service refuses its token', async () => {
    const worker = start({
      token: 'mjw_revoked-or-wrong',
      jobTypes: ['sdk-token'],
      handle: async () => ({ bytes: Buffer.from('x'), contentType: 'text/plain' }),
    });
    await expect(worker.done).rejects.toThrow(/401/);
  });
});
