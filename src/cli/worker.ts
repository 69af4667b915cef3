import { spawn } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { parseDuration } from '../config.js';
import { runWorker, WorkerJobError, type JobContext, type JobOutput, type WorkerJob } from '../worker-sdk/index.js';
import { extensionOf } from '../media/extensions.js';
import { SLOT_NAMES } from '../contract/api.js';

export const WORKER_USAGE = `usage: media-jobs worker [--url URL] [--token TOKEN] --job-type NAME [--job-type NAME…]
                         [--concurrency N] [--grace 30s] -- COMMAND [ARG…]
  Serves remote job types by running COMMAND once per job (docs/workers.md).
  --url, --token   the service and a worker token (or MEDIA_JOBS_URL, MEDIA_JOBS_WORKER_TOKEN)
  --concurrency N  jobs at once (default 1)
  --grace 30s      on SIGTERM/SIGINT, how long running jobs may finish before they are handed back
  In ARGs: {source} {target} {reference} {audio} (first file of the slot), {output} (write the
  result there; an extension may follow, e.g. {output}.png), {input_json}, {dir}, {model}, {uuid}.
  Environment: MJ_JOB_UUID MJ_JOB_TYPE MJ_MODEL MJ_ATTEMPT MJ_OUTPUT MJ_INPUT_JSON MJ_DIR MJ_OPTIONS
  and MJ_SOURCE MJ_TARGET MJ_REFERENCE MJ_AUDIO. A line "progress: [0.42] text" shows in the job's
  status. Exit 0 with an output completes the job; exit 75 fails it retryably; any other fails it.`;

/** Time a command gets between SIGTERM and SIGKILL when its job is cancelled or the worker stops. */
const KILL_GRACE_MS = 5_000;
/** EX_TEMPFAIL (sysexits.h): "try again later", so another attempt may succeed. */
const EX_TEMPFAIL = 75;
const STDERR_LINES = 8;
const SLOTS = SLOT_NAMES;
const PLACEHOLDER = /\{(source|target|reference|audio|output|input_json|dir|model|uuid)\}/g;

class UsageError extends Error {}

interface CommandSpec {
  url: string;
  token: string;
  jobTypes: string[];
  concurrency: number;
  graceMs: number;
  command: string;
  args: string[];
}

function parse(argv: string[], env: NodeJS.ProcessEnv): CommandSpec {
  const sep = argv.indexOf('--');
  if (sep < 0 || sep === argv.length - 1)
    throw new UsageError(
      'give the command to run after "--", e.g. media-jobs worker --job-type upscale -- ./upscale.sh {source} {output}',
    );
  let values;
  try {
    ({ values } = parseArgs({
      args: argv.slice(0, sep),
      options: {
        url: { type: 'string' },
        token: { type: 'string' },
        'job-type': { type: 'string', multiple: true },
        concurrency: { type: 'string', default: '1' },
        grace: { type: 'string', default: '30s' },
      },
    }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const url = values.url ?? env.MEDIA_JOBS_URL;
  const token = values.token ?? env.MEDIA_JOBS_WORKER_TOKEN;
  if (!url || !/^https?:\/\/[^/]/.test(url))
    throw new UsageError("--url (or MEDIA_JOBS_URL) must be the service's http(s) URL");
  if (!token)
    throw new UsageError(
      '--token (or MEDIA_JOBS_WORKER_TOKEN) is required: a worker token from media-jobs workers create-token',
    );
  const jobTypes = (values['job-type'] ?? [])
    .flatMap((t) => t.split(','))
    .map((t) => t.trim())
    .filter(Boolean);
  if (jobTypes.length === 0) throw new UsageError('--job-type NAME is required (repeat it for several types)');
  const concurrency = Number(values.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 64)
    throw new UsageError('--concurrency must be a whole number from 1 to 64');
  let graceMs: number;
  try {
    // A bare number is seconds here (as in the Python worker), not parseDuration's milliseconds.
    graceMs = /^\s*\d+(\.\d+)?\s*$/.test(values.grace)
      ? Math.round(Number(values.grace) * 1000)
      : parseDuration(values.grace);
  } catch (err) {
    throw new UsageError(`--grace: ${(err as Error).message}`);
  }
  const command = argv[sep + 1]!;
  // A command that cannot start would fail every job this worker claims: refuse it up front.
  if (!findExecutable(command, env.PATH ?? ''))
    throw new UsageError(
      `cannot run "${command}": not found or not executable${command.includes('/') ? '' : ' on PATH'}`,
    );
  return { url, token, jobTypes, concurrency, graceMs, command, args: argv.slice(sep + 2) };
}

function findExecutable(command: string, pathEnv: string): string | undefined {
  const candidates = command.includes('/')
    ? [command]
    : pathEnv
        .split(path.delimiter)
        .filter(Boolean)
        .map((d) => path.join(d, command));
  for (const c of candidates) {
    try {
      fs.accessSync(c, fs.constants.X_OK);
      if (fs.statSync(c).isFile()) return c;
    } catch {
      /* next */
    }
  }
  return undefined;
}

/**
 * `media-jobs worker … -- COMMAND`: runs until SIGTERM/SIGINT (exit 0: a first signal stops
 * gracefully, a second stops at once, still handing jobs back) or until the service refuses the
 * worker (exit 1); bad usage exits 2.
 */
export async function runWorkerCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  if (argv[0] === '--help' || argv[0] === '-h') {
    process.stdout.write(`${WORKER_USAGE}\n`);
    return 0;
  }
  let spec: CommandSpec;
  try {
    spec = parse(argv, env);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`media-jobs worker: ${err.message} (see media-jobs worker --help)\n`);
    return 2;
  }
  const log = (message: string, fields: Record<string, unknown> = {}) =>
    process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), msg: message, ...fields })}\n`);
  // The command gets the service's URL but never the worker's credential.
  const baseEnv = { ...env };
  delete baseEnv.MEDIA_JOBS_WORKER_TOKEN;
  const worker = runWorker({
    url: spec.url,
    token: spec.token,
    jobTypes: spec.jobTypes,
    concurrency: spec.concurrency,
    log,
    handle: (job, ctx) => runCommand(spec, baseEnv, job, ctx, log),
  });
  let signals = 0;
  const stop = (sig: NodeJS.Signals) => {
    signals++;
    if (signals === 1)
      log('stopping: no new jobs; running ones get the grace period, then are handed back', {
        signal: sig,
        grace_ms: spec.graceMs,
      });
    else log('stopping now: running jobs are handed back', { signal: sig });
    void worker.stop(signals === 1 ? spec.graceMs : 0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  log('worker started', {
    url: spec.url,
    job_types: spec.jobTypes,
    concurrency: spec.concurrency,
    command: spec.command,
  });
  try {
    await worker.done;
    log('worker stopped');
    return 0;
  } catch (err) {
    log('worker stopped: the service refused it', { error: (err as Error).message });
    return 1;
  } finally {
    process.off('SIGTERM', stop);
    process.off('SIGINT', stop);
  }
}

type Slot = (typeof SLOTS)[number];

/** Downloads one staged input into the job's directory; a failed download is retryable. */
async function downloadInput(ctx: JobContext, dir: string, slot: Slot, url: string, name: string): Promise<string> {
  let got: { bytes: Buffer; contentType: string };
  try {
    got = await ctx.download(url);
  } catch (err) {
    if (ctx.signal.aborted) throw err;
    // The service's own staged copy: another attempt stages it afresh.
    throw new WorkerJobError('internal_error', `could not download the staged ${slot}: ${(err as Error).message}`, {
      retryable: true,
    });
  }
  const file = path.join(dir, `${name}.${extensionOf(got.contentType)}`);
  await fsp.writeFile(file, got.bytes);
  return file;
}

/** The job's input with its media slots as local files, and each slot's first file. */
async function downloadInputs(job: WorkerJob, ctx: JobContext, dir: string) {
  const local: Record<string, unknown> = { ...job.input };
  const first: Partial<Record<Slot, string>> = {};
  for (const slot of SLOTS) {
    const urls = job.media[slot];
    if (!urls || urls.length === 0) continue;
    ctx.progress('downloading media');
    local[slot] = await Promise.all(
      urls.map((u, i) => downloadInput(ctx, dir, slot, u, `${slot}${urls.length > 1 ? `-${i}` : ''}`)),
    );
    first[slot] = (local[slot] as string[])[0];
  }
  return { local, first };
}

/** The command's arguments (placeholders filled in) and environment. */
function commandLine(
  spec: CommandSpec,
  baseEnv: NodeJS.ProcessEnv,
  job: WorkerJob,
  files: { dir: string; inputJson: string; output: string; first: Partial<Record<Slot, string>> },
) {
  const { dir, inputJson, output, first } = files;
  const options = Object.fromEntries(
    Object.entries(job.input).filter(([k]) => !(SLOTS as readonly string[]).includes(k)),
  );
  const values: Record<string, string> = {
    output,
    input_json: inputJson,
    dir,
    model: job.model,
    uuid: job.uuid,
    ...Object.fromEntries(SLOTS.map((s) => [s, first[s] ?? ''])),
  };
  const args = spec.args.map((a) => a.replace(PLACEHOLDER, (_m, k: string) => values[k]!));
  const env: NodeJS.ProcessEnv = {
    ...baseEnv,
    MJ_JOB_UUID: job.uuid,
    MJ_JOB_TYPE: job.jobType,
    MJ_MODEL: job.model,
    MJ_ATTEMPT: String(job.attempt),
    MJ_OUTPUT: output,
    MJ_INPUT_JSON: inputJson,
    MJ_DIR: dir,
    MJ_OPTIONS: JSON.stringify(options),
    ...Object.fromEntries(SLOTS.filter((s) => first[s]).map((s) => [`MJ_${s.toUpperCase()}`, first[s]!])),
  };
  return { args, env };
}

/** The file the command wrote (`output` or `output.<ext>`); none, or an empty one, fails the job. */
async function readOutput(dir: string): Promise<{ bytes: Buffer; produced: string }> {
  const produced = (await fsp.readdir(dir)).filter((f) => f === 'output' || f.startsWith('output.')).sort()[0];
  const stat = produced ? await fsp.stat(path.join(dir, produced)) : undefined;
  if (!produced || !stat?.isFile() || stat.size === 0)
    throw new WorkerJobError(
      'processing_error',
      'the command exited 0 but wrote no output (write the result to {output} or $MJ_OUTPUT)',
    );
  return { bytes: await fsp.readFile(path.join(dir, produced)), produced };
}

/** One job: inputs to files, the command run in its own process group, its output file back. */
async function runCommand(
  spec: CommandSpec,
  baseEnv: NodeJS.ProcessEnv,
  job: WorkerJob,
  ctx: JobContext,
  log: (m: string, f?: Record<string, unknown>) => void,
): Promise<JobOutput> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'media-jobs-worker-'));
  try {
    const { local, first } = await downloadInputs(job, ctx, dir);
    const inputJson = path.join(dir, 'input.json');
    await fsp.writeFile(inputJson, JSON.stringify(local));
    const output = path.join(dir, 'output');
    const { args, env } = commandLine(spec, baseEnv, job, { dir, inputJson, output, first });
    ctx.signal.throwIfAborted();
    ctx.progress('running');
    const exit = await execute(spec.command, args, env, dir, ctx);
    ctx.signal.throwIfAborted();
    if (exit.code === EX_TEMPFAIL)
      throw new WorkerJobError('processing_error', describeExit(exit), { retryable: true });
    if (exit.code !== 0) throw new WorkerJobError('processing_error', describeExit(exit));
    const { bytes, produced } = await readOutput(dir);
    log('command finished', { job_uuid: job.uuid, bytes: bytes.length });
    return { bytes, contentType: guessType(bytes, produced) };
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

function describeExit({
  code,
  signal,
  stderrTail,
}: {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderrTail: string[];
}): string {
  const what =
    code === null ? `the command was killed by ${signal ?? 'a signal'}` : `the command exited with code ${code}`;
  const last = stderrTail.join('\n').slice(-900);
  return last ? `${what}: ${last}` : what;
}

/** The service sniffs media itself; JSON and text it takes only as declared, so say which. */
function guessType(bytes: Buffer, name: string): string {
  if (name.endsWith('.json')) return 'application/json';
  if (name.endsWith('.txt')) return 'text/plain';
  const head = bytes.subarray(0, 1).toString('latin1');
  if (head === '{' || head === '[') {
    try {
      JSON.parse(bytes.toString('utf8'));
      return 'application/json';
    } catch {
      /* not JSON */
    }
  }
  return 'application/octet-stream';
}

/** A progress line: "progress: 0.42 denoising" or "progress: denoising". */
export function parseProgress(line: string): { text: string; fraction?: number } | undefined {
  const m = /^progress:\s*(.*)$/i.exec(line.trim());
  if (!m) return undefined;
  const rest = m[1]!.trim();
  const n = /^(\d*\.?\d+)(?:\s+(.*))?$/.exec(rest);
  const f = n ? Number(n[1]) : NaN;
  // A leading number is the fraction only when it is one (0–1): "progress: 3 files left" is text.
  if (n && f >= 0 && f <= 1) return { text: n[2]?.trim() || 'processing', fraction: f };
  return { text: rest || 'processing' };
}

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderrTail: string[];
}

/** Spawns the command (no shell) in its own process group, so a cancel kills the whole group. */
function execute(command: string, args: string[], env: NodeJS.ProcessEnv, cwd: string, ctx: JobContext): Promise<Exit> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const tail: string[] = [];
    let killTimer: NodeJS.Timeout | undefined;
    const kill = (sig: NodeJS.Signals) => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, sig);
      } catch {
        /* the group is gone */
      }
    };
    const onAbort = () => {
      kill('SIGTERM');
      killTimer = setTimeout(() => kill('SIGKILL'), KILL_GRACE_MS);
    };
    ctx.signal.addEventListener('abort', onAbort, { once: true });
    const watch = (stream: NodeJS.ReadableStream, isErr: boolean) => {
      createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
        process.stderr.write(`[${path.basename(command)}] ${line}\n`);
        const p = parseProgress(line);
        if (p) ctx.progress(p.text, p.fraction);
        else if (isErr) {
          tail.push(line.slice(0, 1000));
          if (tail.length > STDERR_LINES) tail.shift();
        }
      });
    };
    watch(child.stdout, false);
    watch(child.stderr, true);
    child.on('error', (err) => {
      ctx.signal.removeEventListener('abort', onAbort);
      clearTimeout(killTimer);
      reject(new WorkerJobError('internal_error', `could not start ${command}: ${err.message}`, { retryable: true }));
    });
    // What the command left behind in its group goes when it exits; otherwise a background
    // process holding its stdout would keep the job (and 'close') waiting.
    child.on('exit', () => kill('SIGKILL'));
    child.on('close', (code, signal) => {
      ctx.signal.removeEventListener('abort', onAbort);
      clearTimeout(killTimer);
      resolve({ code, signal, stderrTail: tail });
    });
  });
}
