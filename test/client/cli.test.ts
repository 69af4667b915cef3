import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runClientCommand, type CliStream } from '../../src/cli/client.js';
import { shortJobId } from '../../src/contract/api.js';
import { defaultJobTypes } from '../../src/processors/catalogue.js';
import { sleepJobType } from '../helpers/job-types.js';
import { startMediaServer, type MediaServer } from '../helpers/media-server.js';
import { startService, tempDir, waitFor, type TestService } from '../helpers/service.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

let svc: TestService;
let media: MediaServer;
const dir = tempDir('mj-cli-');

beforeAll(async () => {
  media = await startMediaServer();
  svc = await startService({}, { jobTypes: [...defaultJobTypes({ threads: 1 }), sleepJobType()] });
});
afterAll(async () => {
  await svc?.stop();
  await media?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function stream(tty = false): CliStream & { text: string } {
  const s = { text: '', isTTY: tty, columns: 100, write: (c: string) => ((s.text += c), true) };
  return s;
}

/** Runs a command in this process with captured output (the service runs here too). */
async function run(
  argv: string[],
  opts: { env?: Record<string, string | undefined>; tty?: boolean } = {},
): Promise<Run> {
  const stdout = stream();
  const stderr = stream(opts.tty);
  const code = await runClientCommand(argv, {
    stdout,
    stderr,
    env: { MEDIA_JOBS_URL: svc.base, MEDIA_JOBS_API_KEY: svc.key, ...opts.env },
    handleSignals: false,
  });
  return { code, stdout: stdout.text, stderr: stderr.text };
}

/**
 * Runs the CLI as its own process, the way a user does. Asynchronous on purpose: the service
 * answering it runs in this process, so a synchronous spawn would deadlock.
 */
function spawnCli(argv: string[], env: Record<string, string> = {}): Promise<Run> {
  // Through src/main.ts once it dispatches client commands; until then through a tiny entry.
  const main = fs.readFileSync(path.join(root, 'src/main.ts'), 'utf8');
  const entry = main.includes('runClientCommand')
    ? path.join(root, 'src/main.ts')
    : path.join(root, 'test/client/cli-entry.ts');
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', entry, ...argv],
      {
        cwd: root,
        env: { ...process.env, MEDIA_JOBS_URL: svc.base, MEDIA_JOBS_API_KEY: svc.key, LOG_LEVEL: 'warn', ...env },
        timeout: 120_000,
      },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

const transformInput = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({ source: media.url('/photo.jpg'), ...extra });

describe('media-jobs client commands', () => {
  it('submit --wait, then result --download saves the image', async () => {
    const sub = await run([
      'submit',
      'image-transform',
      '--model',
      'lanczos3',
      '--input',
      transformInput({ width: 200, format: 'png' }),
      '--wait',
    ]);
    expect(sub.stderr).toMatch(/^submitted [0-9a-f-]{36}\n/);
    expect(sub.code).toBe(0);
    expect(sub.stdout).toMatch(/^uuid {10}[0-9a-f-]{36}\n/);
    expect(sub.stdout).toMatch(/^status {8}completed$/m);
    // Not a TTY: one plain line per change, no carriage returns.
    expect(sub.stderr).toMatch(/ completed: /);
    expect(sub.stderr).not.toContain('\r');
    const uuid = /^uuid\s+(\S+)/.exec(sub.stdout)![1]!;

    const url = await run(['result', uuid]);
    expect(url.code).toBe(0);
    expect(url.stdout.trim()).toMatch(/^http:\/\/[^/]+\/results\/\S+\?expires=\d+&signature=\S+$/);
    expect(url.stderr).toMatch(/^image\/png, /);

    const file = path.join(dir, 'cli.png');
    const dl = await run(['result', uuid, '--download', file]);
    expect(dl.code).toBe(0);
    expect(dl.stdout).toMatch(new RegExp(`^saved ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(image/png, `));
    expect(await sharp(file).metadata()).toMatchObject({ format: 'png', width: 200, height: 150 });
  });

  it('prints JSON with --json', async () => {
    const sub = await run(['submit', 'test-sleep', '--model', 'v1', '--input', '{"ms":0}', '--json']);
    expect(sub.code).toBe(0);
    const job = JSON.parse(sub.stdout);
    expect(job).toMatchObject({ job_type: 'test-sleep', model: 'v1', status: 'queued' });

    const waited = await run(['wait', job.uuid, '--json']);
    expect(waited.code).toBe(0);
    expect(JSON.parse(waited.stdout)).toMatchObject({ uuid: job.uuid, status: 'completed' });

    const status = await run(['status', job.uuid, '--json']);
    expect(JSON.parse(status.stdout)).toMatchObject({ uuid: job.uuid, status: 'completed', result_ready: true });

    const result = await run(['result', job.uuid, '--json']);
    expect(JSON.parse(result.stdout)).toMatchObject({
      uuid: job.uuid,
      content_type: 'application/json',
      url: expect.any(String),
    });

    const types = await run(['job-types', '--json']);
    expect(JSON.parse(types.stdout).map((t: { name: string }) => t.name)).toContain('image-transform');
  });

  it('reuses an --idempotency-key: the same job comes back', async () => {
    const args = [
      'submit',
      'test-sleep',
      '--model',
      'v1',
      '--input',
      '{"ms":0}',
      '--idempotency-key',
      `cli-${Date.now()}`,
      '--json',
    ];
    const a = JSON.parse((await run(args)).stdout);
    const b = JSON.parse((await run(args)).stdout);
    expect(b.uuid).toBe(a.uuid);
  });

  it('passes webhook settings through', async () => {
    const sub = await run([
      'submit',
      'test-sleep',
      '--model',
      'v1',
      '--input',
      '{"ms":0}',
      '--webhook',
      media.url('/hook'),
      '--webhook-secret',
      'shh',
      '--webhook-event',
      'job.failed',
      '--json',
    ]);
    expect(sub.code).toBe(0);
    const bad = await run([
      'submit',
      'test-sleep',
      '--model',
      'v1',
      '--webhook',
      media.url('/hook'),
      '--webhook-event',
      'job.done',
    ]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--webhook-event must be one of job.completed, job.failed, job.cancelled');
  });

  it('wait on a failed job prints it and exits 1', async () => {
    const sub = await run([
      'submit',
      'image-transform',
      '--model',
      'lanczos3',
      '--input',
      JSON.stringify({ source: media.url('/missing.jpg') }),
      '--json',
    ]);
    const { uuid } = JSON.parse(sub.stdout);
    const w = await run(['wait', uuid]);
    expect(w.code).toBe(1);
    expect(w.stdout).toMatch(/^status {8}failed$/m);
    expect(w.stdout).toMatch(/^error {9}media_fetch_failed: input\.source: download failed: HTTP 404$/m);
    expect(w.stderr).toContain(
      `media-jobs: job ${uuid} failed: media_fetch_failed: input.source: download failed: HTTP 404`,
    );
  });

  it('draws one updating line on a TTY', async () => {
    const sub = await run(['submit', 'test-sleep', '--model', 'v1', '--input', '{"ms":1500}', '--json']);
    const { uuid } = JSON.parse(sub.stdout);
    const w = await run(['wait', uuid], { tty: true });
    expect(w.code).toBe(0);
    expect(w.stderr).toContain('\r\x1b[2K');
    expect(w.stderr).toMatch(new RegExp(`${shortJobId(uuid)} {2}(queued|processing|completed)`));
    expect(w.stderr).not.toContain('\n'); // the line is redrawn, never scrolled
    expect(w.stderr.endsWith('\r\x1b[2K')).toBe(true); // and cleared before the final output
    expect(w.stdout).toMatch(/^status {8}completed$/m);
  });

  it('cancels a job; cancelling it again is an API error', async () => {
    const { uuid } = JSON.parse(
      (await run(['submit', 'test-sleep', '--model', 'v1', '--input', '{"ms":60000}', '--json'])).stdout,
    );
    const c = await run(['cancel', uuid]);
    expect(c.code).toBe(0);
    expect(c.stdout).toMatch(/^status {8}cancelled$/m);
    const again = await run(['cancel', uuid]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(
      /^media-jobs: job is already cancelled; only queued or processing jobs can be cancelled \(HTTP 409, request \S+\)\n$/,
    );
    const w = await run(['wait', uuid]);
    expect(w.code).toBe(1);
  });

  it('submits with a deadline and priority, runs a batch file, and deletes a job', async () => {
    const sub = await run([
      'submit',
      'test-sleep',
      '--model',
      'v1',
      '--input',
      '{"ms":1}',
      '--cancel-after',
      '90s',
      '--priority',
      '-30', // a negative number as the value, not an option
      '--retention',
      '1h',
      '--json',
    ]);
    expect(sub.code, sub.stderr).toBe(0);
    const job = JSON.parse(sub.stdout);
    expect(job.priority).toBe(-30);
    expect(Date.parse(job.deadline) - Date.parse(job.created_at)).toBe(90_000);
    expect((await run(['submit', 'test-sleep', '--model', 'v1', '--priority', '601'])).code).toBe(2);

    const file = path.join(tempDir('mj-cli-batch-'), 'batch.json');
    fs.writeFileSync(
      file,
      JSON.stringify([
        { job_type: 'test-sleep', model: 'v1', input: { ms: 1 } },
        { job_type: 'test-sleep', model: 'v9', input: { ms: 1 } },
      ]),
    );
    const b = await run(['batch', file, '--idempotency-key', 'cli-batch-1']);
    expect(b.code).toBe(1); // one item was refused
    expect(b.stdout).toMatch(/^0\s+200\s+[0-9a-f-]{36}\s+ok$/m);
    expect(b.stdout).toMatch(/^1\s+400\s+-\s+model: must be "v1"$/m);

    await waitFor(async () => (await run(['status', job.uuid, '--json'])).stdout.includes('"completed"'), 'the job');
    const d = await run(['delete', job.uuid]);
    expect(d.code, d.stderr).toBe(0);
    expect(d.stdout).toMatch(/^data_removed {2}true$/m);
    // The list says the data is gone (the tombstone keeps its status).
    const list = await run(['jobs', '--type', 'test-sleep', '--limit', '100']);
    expect(list.stdout).toMatch(new RegExp(`^${job.uuid} +completed \\(data removed\\) +test-sleep`, 'm'));
    const eq = await run(['submit', 'test-sleep', '--model', 'v1', '--input', '{"ms":1}', '--priority=-600', '--json']);
    expect(JSON.parse(eq.stdout).priority).toBe(-600);
  });

  it('wait shows each progress step between the start and the end', async () => {
    const sub = await run(['submit', 'test-sleep', '--model', 'v1', '--input', '{"ms":3000,"steps":3}', '--json']);
    const { uuid } = JSON.parse(sub.stdout);
    const w = await run(['wait', uuid]);
    expect(w.code, w.stderr).toBe(0);
    // Every step (1 s apart, well over the stream's 500 ms throttle), with its percentage.
    for (const step of ['sleeping (1 of 3) (33%)', 'sleeping (2 of 3) (67%)'])
      expect(w.stderr).toContain(`${uuid}  processing: ${step}`);
    expect(w.stdout).toMatch(/^status {8}completed$/m);
  });

  it('lists jobs as a table, filtered', async () => {
    const key = await svc.newKey('cli-lister');
    const env = { MEDIA_JOBS_API_KEY: key };
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push(
        JSON.parse(
          (await run(['submit', 'test-sleep', '--model', 'v1', '--input', '{"ms":0}', '--json'], { env })).stdout,
        ).uuid,
      );
    const list = await run(['jobs', '--type', 'test-sleep'], { env });
    expect(list.code).toBe(0);
    const lines = list.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^UUID +STATUS +TYPE +MODEL +CREATED +DETAIL$/);
    expect(
      lines
        .slice(1)
        .map((l) => l.split(/\s+/)[0])
        .sort(),
    ).toEqual([...ids].sort());
    const page = await run(['jobs', '--limit', '2', '--json'], { env });
    const parsed = JSON.parse(page.stdout);
    expect(parsed.jobs).toHaveLength(2);
    const rest = await run(['jobs', '--cursor', parsed.next_cursor, '--json'], { env });
    expect(JSON.parse(rest.stdout).jobs).toHaveLength(1);
    const all = await run(['jobs', '--all', '--limit', '1', '--json'], { env });
    expect(JSON.parse(all.stdout).jobs).toHaveLength(3);
    const none = await run(['jobs', '--status', 'failed'], { env });
    expect(none).toMatchObject({ code: 0, stdout: '', stderr: 'no jobs\n' });
  });

  it('exits 1 with the API message on stderr for API errors', async () => {
    const notFound = await run(['status', '00000000-0000-4000-8000-000000000000']);
    expect(notFound.code).toBe(1);
    expect(notFound.stdout).toBe('');
    expect(notFound.stderr).toMatch(/^media-jobs: job not found \(HTTP 404, request \S+\)\n$/);

    const badModel = await run(['submit', 'image-transform', '--model', 'bicubic', '--input', transformInput()]);
    expect(badModel.code).toBe(1);
    expect(badModel.stderr).toMatch(/^media-jobs: model: must be one of "lanczos3", "mitchell", "nearest" \(HTTP 400/);

    const badKey = await run(['job-types'], { env: { MEDIA_JOBS_API_KEY: 'mj_wrong' } });
    expect(badKey.code).toBe(1);
    expect(badKey.stderr).toMatch(/^media-jobs: invalid or revoked API key \(HTTP 401/);
  });

  it('exits 2 on usage errors', async () => {
    const cases: Array<[string[], RegExp, Record<string, string | undefined>?]> = [
      [['submit', 'image-transform', '--input', '{}'], /--model is required/],
      [['submit', 'image-transform', '--model', 'lanczos3', '--input', '{nope'], /--input is not valid JSON/],
      [['submit', 'image-transform', '--model', 'lanczos3', '--input', '[1]'], /--input must be a JSON object/],
      [['submit', '--model', 'lanczos3'], /expected TYPE, got none/],
      [['status'], /expected UUID, got none/],
      [['status', 'a', 'b'], /expected UUID, got "a" "b"/],
      [['status', 'x', '--frobnicate'], /Unknown option '--frobnicate'/],
      [['jobs', '--status', 'done'], /--status must be one of/],
      [['jobs', '--limit', '500'], /--limit takes 1 to 100/],
      [['wait', 'x', '--timeout', 'soon'], /--timeout takes a number of seconds/],
      [['status', 'x'], /MEDIA_JOBS_API_KEY is not set/, { MEDIA_JOBS_API_KEY: undefined }],
      [['status', 'x'], /MEDIA_JOBS_URL: .*http or https/, { MEDIA_JOBS_URL: 'ftp://example.com' }],
      [['frobnicate'], /unknown command "frobnicate"/],
    ];
    for (const [argv, message, env] of cases) {
      const r = await run(argv, { env });
      expect([argv.join(' '), r.code]).toEqual([argv.join(' '), 2]);
      expect(r.stderr).toMatch(message);
      expect(r.stdout).toBe('');
    }
    const help = await run(['submit', '--help']);
    expect(help).toMatchObject({ code: 0, stderr: '' });
    expect(help.stdout).toMatch(/^usage: media-jobs submit TYPE --model M/);
  });

  it('reads --input from a file with @', async () => {
    const file = path.join(dir, 'input.json');
    fs.writeFileSync(file, JSON.stringify({ ms: 0 }));
    const r = await run(['submit', 'test-sleep', '--model', 'v1', '--input', `@${file}`, '--json']);
    expect(r.code).toBe(0);
    const missing = await run(['submit', 'test-sleep', '--model', 'v1', '--input', `@${file}.nope`]);
    expect(missing.code).toBe(2);
  });

  it('works as its own process, with real exit codes', async () => {
    const ok = await spawnCli([
      'submit',
      'image-transform',
      '--model',
      'mitchell',
      '--input',
      transformInput({ width: 64 }),
      '--wait',
      '--json',
    ]);
    expect(ok.stderr).not.toMatch(/Error|at /);
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ status: 'completed', model: 'mitchell' });

    const missing = await spawnCli(['status', '00000000-0000-4000-8000-000000000000']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/job not found \(HTTP 404/);

    const usage = await spawnCli(['submit', 'image-transform']);
    expect(usage.code).toBe(2);
  });
});
