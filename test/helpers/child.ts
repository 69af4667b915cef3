import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { client, freePort, waitFor, type Call } from './service.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const MAIN = path.join(root, 'src/main.ts');

/** Runs the CLI the way a user does (from source via tsx), synchronously. */
export function cli(args: string[], env: Record<string, string>) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', MAIN, ...args], {
    cwd: root,
    env: { ...process.env, LOG_LEVEL: 'warn', ...env },
    encoding: 'utf8',
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, lastLine: r.stdout.trim().split('\n').pop() ?? '' };
}

export interface ChildService {
  proc: ChildProcess;
  base: string;
  call: Call;
  output(): string;
  /** SIGKILL: no cleanup, no graceful shutdown. */
  kill9(): Promise<void>;
  /** SIGTERM and wait for exit; returns the exit code. */
  term(): Promise<number | null>;
}

/** Starts `media-jobs serve` in a child process and waits until it answers. */
export async function spawnService(
  env: Record<string, string>,
  key: string,
  opts: { port?: number; role?: 'api' | 'worker' | 'all'; readyPath?: string } = {},
): Promise<ChildService> {
  let port = opts.port;
  port ??= await freePort();
  const role = opts.role ?? 'all';
  let out = '';
  const proc = spawn(process.execPath, ['--import', 'tsx', MAIN, 'serve', '--role', role], {
    cwd: root,
    env: {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'warn',
      MEDIA_ALLOW_PRIVATE_NETWORKS: 'true',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  const base = `http://127.0.0.1:${port}`;
  const call = client(base, key);
  await waitFor(async () => {
    if (proc.exitCode !== null) throw new Error(`service exited early:\n${out}`);
    try {
      // A worker-only process serves only /healthz, /readyz and /metrics.
      const ready = opts.readyPath ?? (role === 'worker' ? '/readyz' : '/api/v1/job-types');
      return (await call('GET', ready)).status === 200;
    } catch {
      return false;
    }
  }, 'the service to start');
  return {
    proc,
    base,
    call,
    output: () => out,
    kill9: async () => {
      proc.kill('SIGKILL');
      await exited;
    },
    term: async () => {
      proc.kill('SIGTERM');
      const code = await exited;
      // A failed graceful stop prints the child's last lines (the watchdog names the pending phase).
      if (code !== 0) console.error(`child exited ${code} on SIGTERM:\n${out.split('\n').slice(-15).join('\n')}`);
      return code;
    },
  };
}
