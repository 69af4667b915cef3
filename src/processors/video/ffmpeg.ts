/**
 * ffmpeg and ffprobe as child processes. The binaries come from @ffmpeg-installer/ffmpeg and
 * @ffprobe-installer/ffprobe (static builds shipped inside npm packages), or from FFMPEG_PATH /
 * FFPROBE_PATH. Every process is tied to an AbortSignal: on abort it is killed with SIGKILL at once.
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { createRequire } from 'node:module';
import type { Readable, Writable } from 'node:stream';

const require = createRequire(import.meta.url);

export interface FfmpegBinaries {
  ffmpeg: string;
  ffprobe: string;
}

/** FFMPEG_PATH / FFPROBE_PATH when set, else the binaries shipped in the installer packages. */
export function resolveBinaries(env: NodeJS.ProcessEnv = process.env): FfmpegBinaries {
  const ffmpeg = env.FFMPEG_PATH || (require('@ffmpeg-installer/ffmpeg') as { path: string }).path;
  const ffprobe = env.FFPROBE_PATH || (require('@ffprobe-installer/ffprobe') as { path: string }).path;
  return { ffmpeg, ffprobe };
}

export class FfmpegError extends Error {
  constructor(
    message: string,
    readonly stderr: string,
  ) {
    super(message);
  }
}

/** Keeps the last `max` characters of a process's stderr, for error messages. */
function stderrTail(child: { stderr: Readable }, max = 4000): () => string {
  let tail = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (s: string) => {
    tail = (tail + s).slice(-max);
  });
  return () => tail;
}

export type Piped = ChildProcessByStdio<Writable, Readable, Readable>;

export interface SpawnedProcess {
  child: Piped;
  /** Resolves on exit code 0; rejects with FfmpegError otherwise (or when killed). */
  done: Promise<void>;
  kill(): void;
}

/** Starts a process with all three stdio streams piped; it dies with SIGKILL when `signal` aborts. */
export function spawnPiped(bin: string, args: string[], signal: AbortSignal): SpawnedProcess {
  const child = spawn(bin, args, { stdio: ['pipe', 'pipe', 'pipe'], windowsHide: true });
  const tail = stderrTail(child);
  const kill = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  signal.addEventListener('abort', kill, { once: true });
  // A consumer that stops reading (or a process that dies) must not crash us with EPIPE.
  child.stdin.on('error', () => {});
  child.stdout.on('error', () => {});
  const done = new Promise<void>((resolve, reject) => {
    // Not an FfmpegError: a binary that cannot start (missing, not executable) is our fault, not the input's.
    child.on('error', (err) => reject(new Error(`cannot run ${bin}: ${err.message}`)));
    child.on('close', (code, sig) => {
      signal.removeEventListener('abort', kill);
      if (code === 0) resolve();
      else reject(new FfmpegError(`${bin} exited with ${sig ?? `code ${code}`}`, tail()));
    });
  });
  done.catch(() => {});
  return { child, done, kill };
}

/** Runs a process to completion and returns its stdout. */
export async function runToEnd(bin: string, args: string[], signal: AbortSignal): Promise<Buffer> {
  const p = spawnPiped(bin, args, signal);
  p.child.stdin.end();
  const chunks: Buffer[] = [];
  p.child.stdout.on('data', (c: Buffer) => chunks.push(c));
  await p.done;
  return Buffer.concat(chunks);
}
