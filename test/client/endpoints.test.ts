import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MediaJobsClient, MediaJobsError } from '../../src/client/index.js';
import { runClientCommand, type CliStream } from '../../src/cli/client.js';
import { verifyWebhook } from '../../src/index.js';
import { sleepJobType } from '../helpers/job-types.js';
import { startService, waitFor, type TestService } from '../helpers/service.js';
import { startReceiver, type Receiver } from '../webhooks/receiver.js';

/** The TypeScript client's and the CLI's endpoint calls, against a real service and receiver. */
let svc: TestService;
let rx: Receiver;
let client: MediaJobsClient;

beforeAll(async () => {
  rx = await startReceiver();
  svc = await startService({}, { jobTypes: [sleepJobType()] });
  client = new MediaJobsClient({ baseUrl: svc.base, apiKey: svc.key, retries: 0 });
});
afterAll(async () => {
  await svc?.stop();
  await rx?.close();
});

function stream(): CliStream & { text: string } {
  const s = { text: '', isTTY: false, columns: 100, write: (c: string) => ((s.text += c), true) };
  return s;
}

async function cli(...argv: string[]) {
  const stdout = stream();
  const stderr = stream();
  const env = { MEDIA_JOBS_URL: svc.base, MEDIA_JOBS_API_KEY: svc.key };
  const code = await runClientCommand(argv, { stdout, stderr, env, handleSignals: false });
  return { code, stdout: stdout.text, stderr: stderr.text };
}

describe('endpoints from the TypeScript client', () => {
  it('creates, rotates, receives, lists deliveries, recovers and deletes', async () => {
    const ep = await client.createWebhookEndpoint({ url: rx.url('/ts'), events: ['job.completed'] });
    expect(ep.status).toBe('enabled');
    const secret = await client.rotateWebhookEndpointSecret(ep.id);
    const job = await client.submit('test-sleep', { model: 'v1', input: { ms: 0 } });
    const [req] = await waitFor(() => {
      const got = rx.requests.filter((r) => r.path === '/ts');
      return got.length > 0 ? got : undefined;
    });
    // Several secrets at once: the receiver's own rotation.
    expect(verifyWebhook(req!.raw, req!.headers, ['unrelated', ep.secret]).job.uuid).toBe(job.uuid);
    expect(verifyWebhook(req!.raw, req!.headers, secret).job.uuid).toBe(job.uuid);
    const page = await waitFor(async () => {
      const p = await client.webhookEndpointDeliveries(ep.id);
      return p.deliveries[0]?.state === 'delivered' ? p : undefined;
    });
    expect(page.deliveries[0]!.job_uuid).toBe(job.uuid);
    expect(page.next_cursor).toBeNull();
    expect(await client.recoverWebhookEndpoint(ep.id, new Date(0))).toBe(0);
    expect((await client.updateWebhookEndpoint(ep.id, { description: 'ci' })).description).toBe('ci');
    expect((await client.enableWebhookEndpoint(ep.id)).status).toBe('enabled');
    expect((await client.listWebhookEndpoints()).map((e) => e.id)).toContain(ep.id);
    await client.deleteWebhookEndpoint(ep.id);
    const err = await client.getWebhookEndpoint(ep.id).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MediaJobsError);
    expect((err as MediaJobsError).status).toBe(404);
  });
});

describe('endpoints from the CLI', () => {
  it('adds, shows, edits, rotates, lists and deletes', async () => {
    const add = await cli('endpoints', 'add', rx.url('/cli'), '--event', 'job.failed', '--json');
    expect(add.code, add.stderr).toBe(0);
    const ep = JSON.parse(add.stdout);
    expect(ep.events).toEqual(['job.failed']);
    const show = await cli('endpoints', 'show', ep.id);
    expect(show.stdout).toContain(`id:          ${ep.id}`);
    const edit = await cli('endpoints', 'edit', ep.id, '--event', 'job.completed', '--event', 'job.failed', '--json');
    expect(JSON.parse(edit.stdout).events).toEqual(['job.completed', 'job.failed']);
    const rotate = await cli('endpoints', 'rotate', ep.id);
    expect(rotate.stdout.trim()).toMatch(/^whsec_/);
    const list = await cli('endpoints');
    expect(list.stdout).toContain(ep.id);
    const recover = await cli('endpoints', 'recover', ep.id, '--since', '2020-01-01T00:00:00Z');
    expect(recover.stdout).toBe('0 deliveries queued again\n');
    expect((await cli('endpoints', 'recover', ep.id)).code).toBe(2);
    expect((await cli('endpoints', 'add', rx.url('/x'), '--event', 'job.queued')).code).toBe(2);
    expect((await cli('endpoints', 'delete', ep.id)).code).toBe(0);
    const gone = await cli('endpoints', 'show', ep.id);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain('webhook endpoint not found');
  });
});
