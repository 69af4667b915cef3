import { spawn } from 'node:child_process';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { parseDuration } from '../config.js';
import { runWorker, WorkerJobError, type JobContext, type JobOutput, type WorkerJob } from '../worker-sdk/index.js';

export const WORKER_USAGE = `usage: media-jobs worker [--url URL] [--token TOKEN] --job-type NAME [--job-type NAME…]
                         [--concurrency N] [--grace 30s] -- COMMAND [ARG…]
  Serves remote job types by running COMMAND once per job (docs/workers.md).
  --url, --token   the service and a worker token (or MEDIA_JOBS_URL, MEDIA_JOBS_WORKER_TOKEN)
  In ARGs: {source} {target} {reference} {audio} (first file of the slot), {output} (write the
  result there; an extension may follow, e.g. {output}.png), {input_json}, {dir}, {model}, {uuid}.
  Environment: MJ_JOB_UUID MJ_JOB_TYPE MJ_MODEL MJ_ATTEMPT MJ_OUTPUT MJ_INPUT_JSON MJ_DIR MJ_OPTIONS
  and MJ_SOURCE MJ_TARGET MJ_REFERENCE MJ_AUDIO. A line "progress: [0.42] text" shows in the job's
  status. Exit 0 with an output completes the job; exit 75 fails it retryably; any other fails it.`;

/** Seconds a command gets between SIGTERM and SIGKILL when its job is cancelled or the worker stops. */
const KILL_GRACE_MS = 5_000;
const SLOTS = ['source', 'target', 'reference', 'audio'] as const;
const EXT: Record<string, string> = {
  'image/jpeg': 'jpg',
  'image/png': 'png',
  'image/webp': 'webp',
  'image/gif': 'gif',
  'image/avif': 'avif',
  'video/mp4': 'mp4',
  'video/webm': 'webm',
  'video/quicktime': 'mov',
  'video/x-matroska': 'mkv',
  'audio/mpeg': 'mp3',
  'audio/wav': 'wav',
  'audio/ogg': 'ogg',
  'audio/flac': 'flac',
  'audio/mp4': 'm4a',
};

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
  if (sep < 0 || sep === argv.length - 1) throw new UsageError('give the command to run after "--"');
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
  if (!url || !/^https?:\/\//.test(url)) throw new UsageError('--url (or MEDIA_JOBS_URL) must be the service\'s http(s) URL');
  if (!token) throw new UsageError('--token (or MEDIA_JOBS_WORKER_TOKEN) is required: a worker token from media-jobs workers create-token');
  const jobTypes = values['job-type'] ?? [];
  if (jobTypes.length === 0) throw new UsageError('--job-type NAME is required (repeat it for several types)');
  const concurrency = Number(values.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 64) throw new UsageError('--concurrency must be a whole number from 1 to 64');
  let graceMs: number;
  try {
    graceMs = parseDuration(values.grace);
  } catch (err) {
    throw new UsageError(`--grace: ${(err as Error).message}`);
  }
  return { url, token, jobTypes, concurrency, graceMs, command: argv[sep + 1]!, args: argv.slice(sep + 2) };
}

/** Runs the worker until SIGTERM/SIGINT (exit 0) or until the service refuses it (exit 1). */
export async function runWorkerCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let spec: CommandSpec;
  try {
    spec = parse(argv, env);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`media-jobs worker: ${err.message}\n${WORKER_USAGE}\n`);
    return 2;
  }
  const log = (message: string, fields: Record<string, unknown> = {}) => process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), msg: message, ...fields })}\n`);
  const worker = runWorker({
    url: spec.url,
    token: spec.token,
    jobTypes: spec.jobTypes,
    concurrency: spec.concurrency,
    log,
    handle: (job, ctx) => runCommand(spec, job, ctx, log),
  });
  const stop = () => {
    log('stopping: no new jobs; running ones get the grace period, then are handed back', { grace_ms: spec.graceMs });
    void worker.stop(spec.graceMs);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  log('worker started', { url: spec.url, job_types: spec.jobTypes, concurrency: spec.concurrency });
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

/** One job: inputs to files, the command run in its own process group, its output file back. */
async function runCommand(spec: CommandSpec, job: WorkerJob, ctx: JobContext, log: (m: string, f?: Record<string, unknown>) => void): Promise<JobOutput> {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'media-jobs-worker-'));
  try {
    const local: Record<string, unknown> = { ...job.input };
    const first: Partial<Record<(typeof SLOTS)[number], string>> = {};
    for (const slot of SLOTS) {
      const urls = job.media[slot];
      if (!urls) continue;
      ctx.progress('downloading media');
      local[slot] = await Promise.all(
        urls.map(async (u, i) => {
          const { bytes, contentType } = await ctx.download(u);
          const file = path.join(dir, `${slot}${urls.length > 1 ? `-${i}` : ''}.${EXT[contentType.split(';')[0]!.trim()] ?? 'bin'}`);
          await fsp.writeFile(file, bytes);
          return file;
        }),
      );
      first[slot] = (local[slot] as string[])[0];
    }
    const inputJson = path.join(dir, 'input.json');
    await fsp.writeFile(inputJson, JSON.stringify(local));
    const output = path.join(dir, 'output');
    const options = Object.fromEntries(Object.entries(job.input).filter(([k]) => !(SLOTS as readonly string[]).includes(k)));
    const values: Record<string, string> = {
      output,
      input_json: inputJson,
      dir,
      model: job.model,
      uuid: job.uuid,
      ...Object.fromEntries(SLOTS.map((s) => [s, first[s] ?? ''])),
    };
    const args = spec.args.map((a) => a.replace(/\{(source|target|reference|audio|output|input_json|dir|model|uuid)\}/g, (_m, k: string) => values[k]!));
    const childEnv: NodeJS.ProcessEnv = {
      ...process.env,
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
    ctx.progress('running');
    const { code, stderrTail } = await execute(spec.command, args, childEnv, dir, ctx);
    ctx.signal.throwIfAborted();
    if (code === 75) throw new WorkerJobError('processing_error', describeExit(code, stderrTail), { retryable: true });
    if (code !== 0) throw new WorkerJobError('processing_error', describeExit(code, stderrTail));
    const produced = (await fsp.readdir(dir)).find((f) => f === 'output' || f.startsWith('output.'));
    const bytes = produced ? await fsp.readFile(path.join(dir, produced)) : Buffer.alloc(0);
    if (bytes.length === 0) throw new WorkerJobError('processing_error', 'the command exited 0 but wrote no output (write the result to {output} or $MJ_OUTPUT)');
    log('command finished', { job_uuid: job.uuid, bytes: bytes.length });
    return { bytes, contentType: guessType(bytes, produced!) };
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
}

function describeExit(code: number | null, tail: string[]): string {
  const what = code === null ? 'the command was killed by a signal' : `the command exited with code ${code}`;
  const last = tail.join('\n').slice(-900);
  return last ? `${what}: ${last}` : what;
}

/** The service sniffs media itself; JSON and text it takes only as declared, so say which. */
function guessType(bytes: Buffer, name: string): string {
  if (name.endsWith('.json')) return 'application/json';
  if (name.endsWith('.txt')) return 'text/plain';
  const text = bytes.subarray(0, 1).toString('latin1');
  if (text === '{' || text === '[') {
    try {
      JSON.parse(bytes.toString('utf8'));
      return 'application/json';
    } catch {
      /* not JSON */
    }
  }
  return 'application/octet-stream';
}

/** Spawns the command in its own process group; a cancel kills the whole group. */
function execute(command: string, args: string[], env: NodeJS.ProcessEnv, cwd: string, ctx: JobContext): Promise<{ code: number | null; stderrTail: string[] }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const tail: string[] = [];
    let killTimer: NodeJS.Timeout | undefined;
    const kill = (sig: NodeJS.Signals) => {
      try {
        process.kill(-child.pid!, sig);
      } catch {
        /* already gone */
      }
    };
    const onAbort = () => {
      kill('SIGTERM');
      killTimer = setTimeout(() => kill('SIGKILL'), KILL_GRACE_MS);
    };
    ctx.signal.addEventListener('abort', onAbort, { once: true });
    const watch = (stream: NodeJS.ReadableStream, isErr: boolean) => {
      createInterface({ input: stream }).on('line', (line) => {
        process.stderr.write(`[${path.basename(command)}] ${line}\n`);
        const m = /^progress:\s*(?:(\d*\.?\d+)\s+)?(.*)$/i.exec(line.trim());
        if (m) {
          const f = m[1] === undefined ? undefined : Number(m[1]);
          ctx.progress(m[2] || 'running', f !== undefined && f >= 0 && f <= 1 ? f : undefined);
        } else if (isErr) {
          tail.push(line);
          if (tail.length > 8) tail.shift();
        }
      });
    };
    watch(child.stdout!, false);
    watch(child.stderr!, true);
    child.on('error', (err) => {
      ctx.signal.removeEventListener('abort', onAbort);
      reject(new WorkerJobError('internal_error', `could not start ${command}: ${err.message}`));
    });
    child.on('close', (code) => {
      ctx.signal.removeEventListener('abort', onAbort);
      clearTimeout(killTimer);
      // Whatever the command left behind in its group goes too.
      kill('SIGKILL');
      resolve({ code, stderrTail: tail });
    });
  });
}

