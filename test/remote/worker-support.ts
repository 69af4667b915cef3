import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';
import type { TestService } from '../helpers/service.js';
import { waitFor } from '../helpers/service.js';
import { declaredTypesFile } from './support.js';

/** Shared by the tests of the protocol's clients: the SDK, the CLI worker and the Python worker. */
export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const PY_WORKER = path.join(root, 'examples/python-worker/worker.py');

/**
 * A JOB_TYPES_FILE with one remote type per test, each with an optional image slot and two
 * options. One type per test, because a worker stopped at the end of one test may have a long
 * poll in flight that the service has not yet seen end: it must not take the next test's job.
 */
export function perTestTypes(names: string[]): string {
  return declaredTypesFile({
    job_types: names.map((name) => ({
      name,
      description: `Remote type for the test "${name}".`,
      slots: { source: { required: false, min: 0, max: 2, accepts: 'image', description: 'An image.' } },
      models: [{ name: 'v1', description: 'The only model.' }],
      options: {
        type: 'object',
        properties: { scale: { type: 'integer', minimum: 1, maximum: 4 }, text: { type: 'string', maxLength: 100 } },
        additionalProperties: false,
      },
    })),
  });
}

export type WorkerProcess = ChildProcess & { log: () => string };

/** A worker process (the CLI from source, or the Python one); its output is kept for failure messages. */
export function startWorkerProcess(
  kind: 'cli' | 'python',
  svc: TestService,
  token: string,
  jobType: string,
  command: string[],
  extra: string[] = [],
): WorkerProcess {
  const args =
    kind === 'cli'
      ? ['--import', 'tsx', path.join(root, 'src/main.ts'), 'worker', '--job-type', jobType, ...extra, '--', ...command]
      : [PY_WORKER, '--job-type', jobType, ...extra, '--', ...command];
  const proc = spawn(kind === 'cli' ? process.execPath : 'python3', args, {
    cwd: root,
    // PYTHONDONTWRITEBYTECODE: no __pycache__ beside the example.
    env: { ...process.env, MEDIA_JOBS_URL: svc.base, MEDIA_JOBS_WORKER_TOKEN: token, PYTHONDONTWRITEBYTECODE: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
  return Object.assign(proc, { log: () => out });
}

export const exited = (p: ChildProcess): Promise<void> =>
  p.exitCode !== null || p.signalCode !== null
    ? Promise.resolve()
    : new Promise<void>((r) => p.once('exit', () => r()));

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A command that writes its pid to `<dir>/pid`, reports progress, then sleeps until killed. */
export function sleeper(dir: string): string[] {
  return [
    'python3',
    '-c',
    `import os,time; open(${JSON.stringify(path.join(dir, 'pid'))},'w').write(str(os.getpid())); print('progress: 0.5 sleeping', flush=True); time.sleep(600)`,
  ];
}

/** The pid a command wrote to `file`, once it has. */
export async function pidIn(file: string, what = 'the command to start'): Promise<number> {
  return Number(await waitFor(() => fs.existsSync(file) && fs.readFileSync(file, 'utf8').trim(), what));
}

/** The public API, as a client uses it. */
export function api(svc: TestService) {
  return {
    async submit(jobType: string, input: Record<string, unknown>, webhook?: string): Promise<string> {
      const r = await svc.call('POST', `/api/v1/jobs/submit/${jobType}`, {
        body: {
          job_type: jobType,
          model: 'v1',
          input,
          ...(webhook ? { webhook: { url: webhook, secret: WEBHOOK_SECRET } } : {}),
        },
      });
      expect(r.status, r.text).toBe(200);
      return r.body.data.uuid as string;
    },
    status: async (uuid: string) => (await svc.call('GET', `/api/v1/jobs/${uuid}/status`)).body.data,
    async result(uuid: string): Promise<{ type: string; bytes: Buffer }> {
      const link = await svc.call('GET', `/api/v1/jobs/${uuid}/result`);
      expect(link.status, link.text).toBe(200);
      const res = await fetch(link.body.data.url);
      expect(res.status).toBe(200);
      return { type: link.body.data.content_type as string, bytes: Buffer.from(await res.arrayBuffer()) };
    },
    async attempts(uuid: string): Promise<number> {
      const row = await svc.app.store.db
        .selectFrom('jobs')
        .select('attempts')
        .where('uuid', '=', uuid)
        .executeTakeFirstOrThrow();
      return row.attempts;
    },
    cancel: (uuid: string) => svc.call('POST', `/api/v1/jobs/${uuid}/cancel`),
  };
}

export const WEBHOOK_SECRET = 'worker-tests-secret';

/** SIGTERM with nothing running: the worker cuts its long poll short and exits 0. */
export async function stopIdle(w: WorkerProcess): Promise<void> {
  w.kill('SIGTERM');
  await exited(w);
  expect(w.exitCode, w.log()).toBe(0);
}
