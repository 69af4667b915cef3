import { spawn, type SpawnOptions } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultJobTypes } from '../../src/processors/catalogue.js';
import { createWorkerToken } from '../../src/store/worker-tokens.js';
import { sleepJobType } from '../helpers/job-types.js';
import { startMediaServer, type MediaServer } from '../helpers/media-server.js';
import { freePort, startService, tempDir, waitFor, type TestService } from '../helpers/service.js';
import { perTestTypes, root } from '../remote/worker-support.js';

/**
 * The Python package (clients/python) for real: pip installs it offline into a fresh venv, then
 * its unittest suites run with that venv's Python against services started here, over loopback.

 */
const PY_DIR = path.join(root, 'clients/python');
const TESTS_DIR = path.join(PY_DIR, 'tests');
/** One declared type per worker test (a stopped worker's late long poll must not take the next test's job). */
const REMOTE_TYPES = [
  'py-w-e2e',
  'py-w-fail',
  'py-w-cancel',
  'py-w-stop',
  'py-w-cli',
  'py-w-progress',
  'py-w-deadline',
];

interface Run {
  code: number | null;
  out: string;
}

function run(cmd: string, args: string[], opts: SpawnOptions = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
    let out = '';
    p.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    p.on('error', reject);
    p.on('close', (code) => resolve({ code, out }));
  });
}

let venv: string;
let python: string;
let svc: TestService;
let limited: TestService;
let media: MediaServer;
let workerToken: string;

beforeAll(async () => {
  venv = path.join(tempDir('mj-py-venv-'), 'venv');
  // MJ_TEST_PYTHON picks another interpreter (e.g. a Python 3.9) for the venv.
  const made = await run(process.env.MJ_TEST_PYTHON ?? 'python3', ['-m', 'venv', venv]);
  expect(made.code, made.out).toBe(0);
  python = path.join(venv, 'bin/python');
  // Offline (--no-index) and with the Python alone (the package's own build backend needs nothing).
  const pip = await run(
    python,
    ['-m', 'pip', 'install', '--no-index', '--no-build-isolation', '--disable-pip-version-check', '--quiet', PY_DIR],
    { env: { ...process.env, PIP_NO_INPUT: '1' } },
  );
  expect(pip.code, pip.out).toBe(0);

  media = await startMediaServer();
  svc = await startService(
    { JOB_TYPES_FILE: perTestTypes(REMOTE_TYPES), RATE_LIMIT_SUBMIT: '0', RATE_LIMIT_READ: '0' },
    { jobTypes: [...defaultJobTypes({ threads: 1 }), sleepJobType()] },
  );
  workerToken = (await createWorkerToken(svc.app.store.db, { name: 'python-tests', jobTypes: null }, Date.now())).token;
  // A real 429: two submits a minute.
  limited = await startService({ RATE_LIMIT_SUBMIT: '2' }, { jobTypes: [sleepJobType()] });
}, 240_000);

afterAll(async () => {
  await svc?.stop();
  await limited?.stop();
  await media?.close();
  if (venv) fs.rmSync(path.dirname(venv), { recursive: true, force: true });
});

describe('the Python package', () => {
  it('installs offline with pip, typed, with its worker command', async () => {
    const r = await run(python, [
      '-c',
      'import media_jobs, media_jobs.worker, os; d = os.path.dirname(media_jobs.__file__); print(media_jobs.__version__, os.path.isfile(os.path.join(d, "py.typed")), d)',
    ]);
    expect(r.code, r.out).toBe(0);
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string };
    expect(r.out.trim().split(' ').slice(0, 2)).toEqual([pkg.version, 'True']);
    expect(r.out).toContain(venv); // the installed copy, not the source tree
    expect(fs.existsSync(path.join(venv, 'bin/media-jobs-worker'))).toBe(true);
  });

  it('passes its unittest suites against a started service', async () => {
    const r = await run(python, ['-m', 'unittest', 'discover', '-v', '-s', '.', '-p', 'test_*.py'], {
      cwd: TESTS_DIR, // not clients/python: the tests must import the installed package
      env: {
        ...process.env,
        PYTHONDONTWRITEBYTECODE: '1',
        MEDIA_JOBS_URL: svc.base,
        MEDIA_JOBS_API_KEY: svc.key,
        MEDIA_JOBS_WORKER_TOKEN: workerToken,
        MJ_TEST_MEDIA_URL: media.origin,
        MJ_TEST_REMOTE_TYPES: REMOTE_TYPES.join(','),
        MJ_TEST_LIMITED_URL: limited.base,
        MJ_TEST_LIMITED_KEY: limited.key,
        MJ_TEST_EXPECT_INSTALLED: '1',
      },
    });
    expect(r.code, r.out).toBe(0);
    const ran = Number(/^Ran (\d+) tests? in/m.exec(r.out)?.[1]);
    expect(ran, r.out).toBeGreaterThanOrEqual(40);
    // Every test ran: none skipped.
    const skips = r.out.split('\n').filter((l) => / \.\.\. skipped /.test(l));
    expect(skips, r.out).toEqual([]);
  }, 300_000);

  it("runs the README's and docs/client.md's Python examples as written", async () => {
    // As written, but for where the sample image is: the docs serve it with `npm run example-media`.
    const asWritten = (code: string) =>
      code.replaceAll('http://127.0.0.1:9000/sample1.jpg', `${media.origin}/photo.jpg`);
    const readme = pythonBlocks('README.md');
    const docs = pythonBlocks('docs/client.md');
    const env = { ...process.env, PYTHONDONTWRITEBYTECODE: '1', MEDIA_JOBS_URL: svc.base, MEDIA_JOBS_API_KEY: svc.key };
    const cwd = tempDir('mj-py-examples-');

    const fromReadme = readme.find((b) => b.includes('from media_jobs import Client'))!;
    const a = await run(python, ['-c', asWritten(fromReadme)], { cwd, env });
    expect(a.code, a.out).toBe(0);
    expect(a.out.trim()).toBe('result.webp');
    expect(fs.readFileSync(path.join(cwd, 'result.webp')).subarray(8, 12).toString()).toBe('WEBP');
    fs.rmSync(path.join(cwd, 'result.webp'));

    const example = docs.find((b) => b.includes('client.events('))!;
    const b = await run(python, ['-c', asWritten(example)], { cwd, env });
    expect(b.code, b.out).toBe(0);
    expect(b.out).toMatch(/^saved result\.webp: image\/webp, \d+ bytes$/m);
    expect(b.out).toMatch(/^status completed done$/m);
    expect(b.out).toMatch(/^404 job not found \S+$/m);

    // The receiver, as a server of its own, gets a real signed delivery.
    const receiver = docs.find((b) => b.startsWith('# receiver.py'))!;
    const port = await freePort();
    const proc = spawn(python, ['-c', receiver], {
      cwd,
      env: { ...env, WEBHOOK_SECRET: 'docs-secret', PORT: String(port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
    proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
    try {
      await waitFor(async () => {
        try {
          await fetch(`http://127.0.0.1:${port}/`, { method: 'GET' });
          return true;
        } catch {
          return false;
        }
      }, 'the receiver to listen');
      const submit = async (secret: string) =>
        (
          await svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
            body: {
              job_type: 'test-sleep',
              model: 'v1',
              input: { ms: 0 },
              webhook: { url: `http://127.0.0.1:${port}/`, secret },
            },
          })
        ).body.data.uuid as string;
      const good = await submit('docs-secret');
      await waitFor(() => out.includes(`job.completed ${good} completed`), 'the verified delivery');
      await submit('another-secret');
      await waitFor(() => out.includes('rejected webhook: invalid_signature'), 'the refused delivery');
    } finally {
      proc.kill();
    }
  }, 300_000);
});

/** The ```python blocks of a Markdown file of the repository. */
function pythonBlocks(file: string): string[] {
  const text = fs.readFileSync(path.join(root, file), 'utf8');
  return [...text.matchAll(/```python\n([\s\S]*?)```/g)].map((m) => m[1]!);
}
