import fs from 'node:fs';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { MediaJobsClient, MediaJobsError, WaitTimeoutError } from '../client/index.js';
import {
  JOB_STATUSES,
  isTerminalStatus,
  shortJobId,
  type ApiJob,
  type JobStatus,
  type ResultLink,
} from '../contract/api.js';
import { EVENT_TYPES, type EndpointDelivery, type EventType, type WebhookEndpoint } from '../contract/webhook.js';

/**
 * The client commands of the `media-jobs` CLI: they talk to a running service over HTTP, like any
 * other client, configured by MEDIA_JOBS_URL and MEDIA_JOBS_API_KEY.
 *
 * Exit codes: 0 ok; 1 API error (message on stderr), or a job that ended failed or cancelled under
 * `wait`; 2 usage or configuration error.
 */

export const CLIENT_COMMANDS = [
  'submit',
  'batch',
  'status',
  'cancel',
  'delete',
  'result',
  'wait',
  'jobs',
  'job-types',
  'endpoints',
] as const;
export type ClientCommand = (typeof CLIENT_COMMANDS)[number];
export const isClientCommand = (cmd: string | undefined): cmd is ClientCommand =>
  (CLIENT_COMMANDS as readonly string[]).includes(cmd ?? '');

export const CLIENT_USAGE = `client commands (MEDIA_JOBS_URL, default http://localhost:8080; MEDIA_JOBS_API_KEY):
  media-jobs submit TYPE --model M --input JSON|@FILE [--webhook URL] [--webhook-secret S]
                    [--webhook-event E]... [--idempotency-key K] [--cancel-after D] [--priority N]
                    [--retention D] [--wait [--timeout SEC] [--download FILE]]
  media-jobs batch FILE|- [--idempotency-key K]           submit a JSON array of items (each with job_type)
  media-jobs status UUID
  media-jobs wait UUID [--timeout SEC] [--download FILE]   follow a job until it ends (exit 1 if it failed)
  media-jobs cancel UUID
  media-jobs delete UUID                                  delete a finished job's data (result, input, webhook)
  media-jobs result UUID [--download FILE]                print the signed URL, or save the result
  media-jobs jobs [--status S] [--type T] [--limit N] [--cursor C] [--all]
  media-jobs job-types
  media-jobs endpoints [list]                             your webhook endpoints (every job's events)
  media-jobs endpoints add URL [--event E]... [--description D]
  media-jobs endpoints show|delete|rotate|enable ID
  media-jobs endpoints edit ID [--endpoint-url U] [--event E]... [--description D]
  media-jobs endpoints recover ID --since TIME            send again what failed or was skipped since TIME
  media-jobs endpoints deliveries ID [--limit N] [--cursor C]
  every client command takes --json (print the API's data as JSON) and --url URL`;

export interface CliStream {
  write(s: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export interface CliIO {
  stdout: CliStream;
  stderr: CliStream;
  env: Record<string, string | undefined>;
  /** For tests: the fetch the client uses. */
  fetch?: typeof globalThis.fetch;
  /** For tests: handle SIGINT during `wait` (default true). */
  handleSignals?: boolean;
}

class UsageError extends Error {}

type Options = NonNullable<ParseArgsConfig['options']>;
const COMMON: Options = {
  json: { type: 'boolean' },
  url: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
};

/**
 * `--priority -60`: parseArgs reads a value that starts with "-" as an option of its own, so a
 * negative number after an option that takes a value is joined to it (`--priority=-60`).
 */
function joinNegativeValues(args: string[], options: Options): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const name = /^--([^=]+)$/.exec(args[i]!)?.[1];
    const next = args[i + 1];
    if (name && options[name]?.type === 'string' && next !== undefined && /^-\d+(\.\d+)?$/.test(next)) {
      out.push(`--${name}=${next}`);
      i++;
    } else out.push(args[i]!);
  }
  return out;
}

function parse(args: string[], options: Options, positionals: string[]) {
  let parsed;
  const all = { ...COMMON, ...options };
  try {
    parsed = parseArgs({ args: joinNegativeValues(args, all), options: all, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const values = parsed.values as Record<string, string | boolean | string[] | undefined>;
  if (values.help) return { values, pos: [], help: true };
  if (parsed.positionals.length !== positionals.length) {
    const want = positionals.length ? positionals.join(' ') : 'no arguments';
    throw new UsageError(
      `expected ${want}, got ${parsed.positionals.length ? parsed.positionals.map((p) => JSON.stringify(p)).join(' ') : 'none'}`,
    );
  }
  return { values, pos: parsed.positionals, help: false };
}

function parseSeconds(v: unknown, flag: string): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (typeof v !== 'string' || !/^\d+(\.\d+)?$/.test(v) || !Number.isFinite(n))
    throw new UsageError(`${flag} takes a number of seconds (got "${JSON.stringify(v)}")`);
  return n * 1000;
}

function parseInput(raw: unknown): Record<string, unknown> {
  if (raw === undefined) return {};
  if (typeof raw !== 'string') throw new UsageError('--input takes JSON or @file');
  let text = raw;
  if (text.startsWith('@')) {
    try {
      text = fs.readFileSync(text.slice(1), 'utf8');
    } catch (err) {
      throw new UsageError(`--input ${text}: ${(err as Error).message}`);
    }
  }
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`--input is not valid JSON: ${(err as Error).message}`);
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v))
    throw new UsageError('--input must be a JSON object, e.g. \'{"source":"https://…/photo.jpg"}\'');
  return v as Record<string, unknown>;
}

const EVENTS: readonly string[] = EVENT_TYPES;
const STATUSES: readonly string[] = JOB_STATUSES;

function jobBlock(j: ApiJob): string {
  const rows: Array<[string, string]> = [
    ['uuid', j.uuid],
    ['job_type', j.job_type],
    ['model', j.model],
    ['status', j.status],
    ['status_detail', j.status_detail],
  ];
  if (j.progress) {
    const p = j.progress;
    const measure = p.current !== undefined && p.total !== undefined ? ` (${p.current}/${p.total})` : '';
    rows.push(['progress', `${p.stage}${p.percent === null ? '' : ` ${p.percent}%`}${measure}`]);
  }
  if (j.error_type || j.error_message) rows.push(['error', `${j.error_type ?? 'error'}: ${j.error_message ?? ''}`]);
  rows.push(
    ['result_ready', String(j.result_ready)],
    ['created_at', j.created_at],
    ['started_at', j.started_at ?? '-'],
    ['finished_at', j.finished_at ?? '-'],
  );
  if (j.deadline) rows.push(['deadline', j.deadline]);
  if (j.priority) rows.push(['priority', String(j.priority)]);
  if (j.data_removed) rows.push(['data_removed', 'true']);
  return rows.map(([k, v]) => `${k.padEnd(14)}${v}\n`).join('');
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows
    .map(
      (r) =>
        r
          .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!)))
          .join('  ')
          .trimEnd() + '\n',
    )
    .join('');
}

const human = (n: number) =>
  n < 1024 ? `${n} B` : n < 1024 ** 2 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 ** 2).toFixed(1)} MiB`;

const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/** One updating line on a terminal; plain lines (one per change) otherwise. */
class Progress {
  private timer: NodeJS.Timeout | undefined;
  private frame = 0;
  private text = '';
  private readonly started = Date.now();
  private drawn = false;

  constructor(
    private readonly out: CliStream,
    private readonly uuid: string,
  ) {}

  private get tty(): boolean {
    return this.out.isTTY === true;
  }

  update(job: ApiJob): void {
    const percent = job.progress?.percent;
    // The percentage when the sentence does not already say it ("swapping faces: frame 41 of 120").
    const measure = typeof percent === 'number' && !job.status_detail.includes('%') ? ` (${Math.round(percent)}%)` : '';
    this.text = `${job.status}${job.status_detail ? ` · ${job.status_detail}` : ''}${measure}`;
    if (!this.tty) {
      this.out.write(`${new Date().toISOString()}  ${this.uuid}  ${job.status}: ${job.status_detail}${measure}\n`);
      return;
    }
    this.draw();
    this.timer ??= setInterval(() => this.draw(), 100);
    this.timer.unref();
  }

  private draw(): void {
    const secs = Math.floor((Date.now() - this.started) / 1000);
    const line = `${SPINNER[this.frame++ % SPINNER.length]} ${shortJobId(this.uuid)}  ${this.text}  ${secs}s`;
    const width = Math.max(20, (this.out.columns ?? 80) - 1);
    this.out.write(`\r\x1b[2K${line.length > width ? `${line.slice(0, width - 1)}…` : line}`);
    this.drawn = true;
  }

  /** Clears the line (TTY) so the final output starts clean. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (this.tty && this.drawn) this.out.write('\r\x1b[2K');
    this.drawn = false;
  }
}

interface Ctx {
  io: CliIO;
  client: MediaJobsClient;
  json: boolean;
  out(s: string): void;
  err(s: string): void;
}

function makeClient(io: CliIO, urlFlag: unknown): MediaJobsClient {
  const baseUrl = (typeof urlFlag === 'string' && urlFlag) || io.env.MEDIA_JOBS_URL || 'http://localhost:8080';
  const apiKey = io.env.MEDIA_JOBS_API_KEY;
  if (!apiKey)
    throw new UsageError(
      'MEDIA_JOBS_API_KEY is not set (an operator creates one with: media-jobs keys create --owner NAME)',
    );
  try {
    return new MediaJobsClient({ baseUrl, apiKey, fetch: io.fetch });
  } catch (err) {
    throw new UsageError(
      `MEDIA_JOBS_URL: ${(err as Error).message.replace(/^MediaJobsClient: /, '')} (got "${baseUrl}")`,
    );
  }
}

function printJob(ctx: Ctx, job: ApiJob): void {
  ctx.out(ctx.json ? `${JSON.stringify(job, null, 2)}\n` : jobBlock(job));
}

async function saveResult(ctx: Ctx, uuid: string, file: string): Promise<void> {
  const r = await ctx.client.download(uuid, file);
  if (ctx.json) ctx.out(`${JSON.stringify(r, null, 2)}\n`);
  else ctx.out(`saved ${r.path} (${r.content_type}, ${human(r.size_bytes)})\n`);
}

/**
 * The job once it has ended, showing every change on the way: the events stream carries each
 * status and progress change as it happens (a status long poll sees only what is there when it
 * answers). Polling takes over if the stream fails or the time is up (then it says what it saw).
 */
async function untilEnd(
  client: MediaJobsClient,
  uuid: string,
  timeoutMs: number | undefined,
  signal: AbortSignal,
  onUpdate: (job: ApiJob) => void,
): Promise<ApiJob> {
  const timeout = timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs);
  let last: ApiJob | undefined;
  try {
    for await (const e of client.watch(uuid, { signal: timeout ? AbortSignal.any([signal, timeout]) : signal })) {
      last = e.job;
      onUpdate(e.job);
      if (isTerminalStatus(e.job.status)) return e.job;
    }
  } catch (err) {
    if (signal.aborted) throw err;
    if (timeout?.aborted) {
      const seen = last ? ` (last seen ${last.status}: ${last.status_detail})` : '';
      throw new WaitTimeoutError(
        `timed out after ${Math.round(timeoutMs! / 1000)} s waiting for job ${uuid}${seen}`,
        last,
      );
    }
  }
  return client.wait(uuid, { timeoutMs, signal, onUpdate });
}

/** Follows a job to its end; returns the exit code (0 completed, 1 failed or cancelled). */
async function follow(
  ctx: Ctx,
  uuid: string,
  timeoutMs: number | undefined,
  download: string | undefined,
): Promise<number> {
  const progress = new Progress(ctx.io.stderr, uuid);
  const abort = new AbortController();
  const onSigint = () => abort.abort(new Error('interrupted'));
  if (ctx.io.handleSignals !== false) process.once('SIGINT', onSigint);
  let job: ApiJob;
  try {
    job = await untilEnd(ctx.client, uuid, timeoutMs, abort.signal, (j) => progress.update(j));
  } catch (err) {
    progress.stop();
    if (abort.signal.aborted) {
      ctx.err(`media-jobs: stopped waiting; the job goes on (media-jobs status ${uuid})\n`);
      return 130;
    }
    throw err;
  } finally {
    progress.stop();
    process.removeListener('SIGINT', onSigint);
  }
  printJob(ctx, job);
  if (job.status !== 'completed') {
    ctx.err(
      `media-jobs: job ${uuid} ${job.status}${job.error_type || job.error_message ? `: ${job.error_type ?? 'error'}: ${job.error_message ?? ''}` : ''}\n`,
    );
    return 1;
  }
  if (download) await saveResult(ctx, uuid, download);
  return 0;
}

const COMMANDS: Record<
  ClientCommand,
  { usage: string; run(ctx: Omit<Ctx, 'client' | 'json'>, args: string[]): Promise<number> }
> = {
  submit: {
    usage:
      'media-jobs submit TYPE --model M --input JSON|@FILE [--webhook URL] [--webhook-secret S] [--webhook-event E]... [--idempotency-key K] [--cancel-after D] [--priority N] [--retention D] [--wait [--timeout SEC] [--download FILE]] [--json]',
    async run(base, args) {
      const { values, pos, help } = parse(
        args,
        {
          model: { type: 'string' },
          input: { type: 'string' },
          webhook: { type: 'string' },
          'webhook-secret': { type: 'string' },
          'webhook-event': { type: 'string', multiple: true },
          'idempotency-key': { type: 'string' },
          'cancel-after': { type: 'string' },
          priority: { type: 'string' },
          retention: { type: 'string' },
          wait: { type: 'boolean' },
          timeout: { type: 'string' },
          download: { type: 'string' },
        },
        ['TYPE'],
      );
      if (help) return usage(base, 'submit');
      if (typeof values.model !== 'string' || !values.model)
        throw new UsageError('--model is required (see media-jobs job-types)');
      const input = parseInput(values.input);
      const events = (values['webhook-event'] as string[] | undefined) ?? undefined;
      for (const e of events ?? [])
        if (!EVENTS.includes(e))
          throw new UsageError(`--webhook-event must be one of ${EVENTS.join(', ')} (got "${e}")`);
      if (!values.webhook && (values['webhook-secret'] || events))
        throw new UsageError('--webhook-secret and --webhook-event need --webhook URL');
      if (!values.wait && (values.timeout || values.download))
        throw new UsageError('--timeout and --download go with --wait');
      const timeoutMs = parseSeconds(values.timeout, '--timeout');
      const ctx = { ...base, client: makeClient(base.io, values.url), json: values.json === true };
      const webhook =
        typeof values.webhook === 'string'
          ? {
              url: values.webhook,
              ...(typeof values['webhook-secret'] === 'string' ? { secret: values['webhook-secret'] } : {}),
              ...(events ? { events: events as EventType[] } : {}),
            }
          : undefined;
      let priority: number | undefined;
      if (values.priority !== undefined) {
        priority = Number(values.priority);
        if (!/^-?\d+$/.test(String(values.priority)) || priority < -600 || priority > 600)
          throw new UsageError(`--priority takes an integer from -600 to 600 (got "${String(values.priority)}")`);
      }
      const job = await ctx.client.submit(
        pos[0]!,
        { model: values.model, input, ...(webhook ? { webhook } : {}) },
        {
          idempotencyKey: values['idempotency-key'] as string | undefined,
          cancelAfter: values['cancel-after'] as string | undefined,
          retention: values.retention as string | undefined,
          priority,
        },
      );
      if (!values.wait) {
        printJob(ctx, job);
        return 0;
      }
      if (!ctx.json) ctx.err(`submitted ${job.uuid}\n`);
      return follow(ctx, job.uuid, timeoutMs, values.download as string | undefined);
    },
  },
  status: {
    usage: 'media-jobs status UUID [--json]',
    async run(base, args) {
      const { values, pos, help } = parse(args, {}, ['UUID']);
      if (help) return usage(base, 'status');
      const ctx = { ...base, client: makeClient(base.io, values.url), json: values.json === true };
      printJob(ctx, await ctx.client.status(pos[0]!));
      return 0;
    },
  },
  wait: {
    usage: 'media-jobs wait UUID [--timeout SEC] [--download FILE] [--json]',
    async run(base, args) {
      const { values, pos, help } = parse(args, { timeout: { type: 'string' }, download: { type: 'string' } }, [
        'UUID',
      ]);
      if (help) return usage(base, 'wait');
      const timeoutMs = parseSeconds(values.timeout, '--timeout');
      const ctx = { ...base, client: makeClient(base.io, values.url), json: values.json === true };
      return follow(ctx, pos[0]!, timeoutMs, values.download as string | undefined);
    },
  },
  cancel: {
    usage: 'media-jobs cancel UUID [--json]',
    async run(base, args) {
      const { values, pos, help } = parse(args, {}, ['UUID']);
      if (help) return usage(base, 'cancel');
      const ctx = { ...base, client: makeClient(base.io, values.url), json: values.json === true };
      printJob(ctx, await ctx.client.cancel(pos[0]!));
      return 0;
    },
  },
  delete: {
    usage: 'media-jobs delete UUID [--json]',
    async run(base, args) {
      const { values, pos, help } = parse(args, {}, ['UUID']);
      if (help) return usage(base, 'delete');
      const ctx = { ...base, client: makeClient(base.io, values.url), json: values.json === true };
      printJob(ctx, await ctx.client.delete(pos[0]!));
      return 0;
    },
  },
  batch: {
    usage: 'media-jobs batch FILE|- [--idempotency-key K] [--json]',
    async run(base, args) {
      const { values, pos, help } = parse(args, { 'idempotency-key': { type: 'string' } }, ['FILE']);
      if (help) return usage(base, 'batch');
      let text: string;
      try {
        text = fs.readFileSync(pos[0] === '-' ? 0 : pos[0]!, 'utf8');
      } catch (err) {
        throw new UsageError(`${pos[0]!}: ${(err as Error).message}`);
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch (err) {
        throw new UsageError(`${pos[0]!} is not valid JSON: ${(err as Error).message}`);
      }
      const items = Array.isArray(parsed) ? parsed : (parsed as { jobs?: unknown } | null)?.jobs;
      if (!Array.isArray(items))
        throw new UsageError(
          'the batch file holds a JSON array of submit bodies (each with job_type), or {"jobs": [...]}',
        );
      const ctx = { ...base, client: makeClient(base.io, values.url), json: values.json === true };
      const results = await ctx.client.submitBatch(items as Parameters<MediaJobsClient['submitBatch']>[0], {
        idempotencyKey: values['idempotency-key'] as string | undefined,
      });
      if (ctx.json) ctx.out(`${JSON.stringify({ items: results }, null, 2)}\n`);
      else
        ctx.out(
          table([
            ['#', 'STATUS', 'UUID', 'MESSAGE'],
            ...results.map((r, i) => [String(i), String(r.status), 'uuid' in r.data ? r.data.uuid : '-', r.message]),
          ]),
        );
      return results.every((r) => r.status === 200) ? 0 : 1;
    },
  },
  result: {
    usage: 'media-jobs result UUID [--download FILE] [--json]',
    async run(base, args) {
      const { values, pos, help } = parse(args, { download: { type: 'string' } }, ['UUID']);
      if (help) return usage(base, 'result');
      const ctx = { ...base, client: makeClient(base.io, values.url), json: values.json === true };
      if (typeof values.download === 'string') {
        await saveResult(ctx, pos[0]!, values.download);
        return 0;
      }
      const link: ResultLink = await ctx.client.result(pos[0]!);
      if (ctx.json) ctx.out(`${JSON.stringify(link, null, 2)}\n`);
      else {
        // The URL alone on stdout, so `curl -o out "$(media-jobs result UUID)"` works.
        ctx.out(`${link.url}\n`);
        ctx.err(`${link.content_type}, ${human(link.size_bytes)}; the URL expires at ${link.expires_at}\n`);
      }
      return 0;
    },
  },
  jobs: {
    usage: 'media-jobs jobs [--status S] [--type T] [--limit N] [--cursor C] [--all] [--json]',
    async run(base, args) {
      const { values, help } = parse(
        args,
        {
          status: { type: 'string' },
          type: { type: 'string' },
          limit: { type: 'string' },
          cursor: { type: 'string' },
          all: { type: 'boolean' },
        },
        [],
      );
      if (help) return usage(base, 'jobs');
      if (values.status !== undefined && !STATUSES.includes(values.status as string)) {
        throw new UsageError(`--status must be one of ${STATUSES.join(', ')} (got "${String(values.status)}")`);
      }
      let limit: number | undefined;
      if (values.limit !== undefined) {
        limit = Number(values.limit);
        if (!/^\d+$/.test(String(values.limit)) || limit < 1 || limit > 100)
          throw new UsageError(`--limit takes 1 to 100 (got "${String(values.limit)}")`);
      }
      if (values.all && values.cursor) throw new UsageError('--all starts from the first page: leave out --cursor');
      const ctx = { ...base, client: makeClient(base.io, values.url), json: values.json === true };
      const filter = {
        status: values.status as JobStatus | undefined,
        jobType: values.type as string | undefined,
        limit,
      };
      let jobs: ApiJob[];
      let next: string | null = null;
      if (values.all) {
        jobs = [];
        for await (const j of ctx.client.iterateJobs(filter)) jobs.push(j);
      } else {
        const page = await ctx.client.listJobs({ ...filter, cursor: values.cursor as string | undefined });
        jobs = page.jobs;
        next = page.next_cursor;
      }
      if (ctx.json) {
        ctx.out(`${JSON.stringify({ jobs, next_cursor: next }, null, 2)}\n`);
        return 0;
      }
      if (jobs.length === 0) ctx.err('no jobs\n');
      else {
        ctx.out(
          table([
            ['UUID', 'STATUS', 'TYPE', 'MODEL', 'CREATED', 'DETAIL'],
            ...jobs.map((j) => [
              j.uuid,
              // A deleted job keeps its status as a tombstone: say its data is gone.
              j.data_removed ? `${j.status} (data removed)` : j.status,
              j.job_type,
              j.model,
              j.created_at,
              j.error_message ?? j.status_detail,
            ]),
          ]),
        );
      }
      if (next) ctx.err(`more: media-jobs jobs --cursor ${next}\n`);
      return 0;
    },
  },
  endpoints: {
    usage:
      'media-jobs endpoints [list|add URL|show ID|edit ID|delete ID|rotate ID|enable ID|recover ID --since T|deliveries ID] [--event E]... [--description D] [--endpoint-url U] [--limit N] [--cursor C] [--json]',
    run: runEndpoints,
  },
  'job-types': {
    usage: 'media-jobs job-types [--json]',
    async run(base, args) {
      const { values, help } = parse(args, {}, []);
      if (help) return usage(base, 'job-types');
      const ctx = { ...base, client: makeClient(base.io, values.url), json: values.json === true };
      const types = await ctx.client.jobTypes();
      if (ctx.json) {
        ctx.out(`${JSON.stringify(types, null, 2)}\n`);
        return 0;
      }
      for (const t of types) {
        const slots = Object.entries(t.slots)
          .map(([name, s]) => `${name}${s.required ? '' : '?'}${s.min === s.max ? `×${s.max}` : `×${s.min}-${s.max}`}`)
          .join(' ');
        ctx.out(
          `${t.name}: ${t.description}\n  models: ${t.models.map((m) => m.name).join(', ')}\n  slots:  ${slots || '-'}\n`,
        );
        const props = (t.options as { properties?: Record<string, { description?: string }> }).properties ?? {};
        const names = Object.keys(props);
        if (names.length) ctx.out(`  options: ${names.join(', ')}\n`);
      }
      return 0;
    },
  },
};

function printEndpoint(ctx: Ctx, e: WebhookEndpoint): void {
  if (ctx.json) {
    ctx.out(`${JSON.stringify(e, null, 2)}\n`);
    return;
  }
  const lines = [
    `id:          ${e.id}`,
    `url:         ${e.url}`,
    `events:      ${e.events.join(', ')}`,
    `status:      ${e.status}${e.disabled_reason ? ` (${e.disabled_reason})` : ''}`,
    `secret:      ${e.secret}`,
    ...(e.description ? [`description: ${e.description}`] : []),
    `created_at:  ${e.created_at}`,
  ];
  ctx.out(`${lines.join('\n')}\n`);
}

function endpointEvents(values: Record<string, unknown>): EventType[] | undefined {
  const events = values.event as string[] | undefined;
  for (const e of events ?? [])
    if (!EVENTS.includes(e)) throw new UsageError(`--event must be one of ${EVENTS.join(', ')} (got "${e}")`);
  return events as EventType[] | undefined;
}

/** One action of `endpoints`: `id` is its positional (the URL for `add`), `values` its options. */
type EndpointAction = (ctx: Ctx, id: string, values: Record<string, unknown>) => Promise<void>;

const description = (values: Record<string, unknown>) => values.description as string | undefined;

const ENDPOINT_ACTIONS: Record<string, EndpointAction> = {
  list: async (ctx) => {
    const list = await ctx.client.listWebhookEndpoints();
    if (ctx.json) ctx.out(`${JSON.stringify({ endpoints: list }, null, 2)}\n`);
    else if (list.length === 0) ctx.err('no webhook endpoints\n');
    else
      ctx.out(
        table([['ID', 'STATUS', 'EVENTS', 'URL'], ...list.map((e) => [e.id, e.status, e.events.join(','), e.url])]),
      );
  },
  add: async (ctx, url, values) => {
    const events = endpointEvents(values);
    printEndpoint(ctx, await ctx.client.createWebhookEndpoint({ url, events, description: description(values) }));
  },
  show: async (ctx, id) => {
    printEndpoint(ctx, await ctx.client.getWebhookEndpoint(id));
  },
  edit: async (ctx, id, values) => {
    const url = values['endpoint-url'] as string | undefined;
    const events = endpointEvents(values);
    printEndpoint(ctx, await ctx.client.updateWebhookEndpoint(id, { url, events, description: description(values) }));
  },
  delete: async (ctx, id) => {
    await ctx.client.deleteWebhookEndpoint(id);
    ctx.err(`deleted ${id}\n`);
  },
  rotate: async (ctx, id) => {
    const secret = await ctx.client.rotateWebhookEndpointSecret(id);
    ctx.out(ctx.json ? `${JSON.stringify({ secret })}\n` : `${secret}\n`);
  },
  enable: async (ctx, id) => {
    printEndpoint(ctx, await ctx.client.enableWebhookEndpoint(id));
  },
  recover: async (ctx, id, values) => {
    if (typeof values.since !== 'string') throw new UsageError('recover needs --since TIME (ISO 8601)');
    const count = await ctx.client.recoverWebhookEndpoint(id, values.since);
    ctx.out(ctx.json ? `${JSON.stringify({ count })}\n` : `${count} deliveries queued again\n`);
  },
  deliveries: async (ctx, id, values) => {
    const limit = values.limit === undefined ? undefined : Number(values.limit);
    const page = await ctx.client.webhookEndpointDeliveries(id, { limit, cursor: values.cursor as string | undefined });
    if (ctx.json) ctx.out(`${JSON.stringify(page, null, 2)}\n`);
    else ctx.out(table([['EVENT', 'TYPE', 'JOB', 'STATE', 'ATTEMPTS', 'LAST'], ...page.deliveries.map(deliveryRow)]));
    if (page.next_cursor && !ctx.json)
      ctx.err(`more: media-jobs endpoints deliveries ${id} --cursor ${page.next_cursor}\n`);
  },
};

function deliveryRow(d: EndpointDelivery): string[] {
  const last = d.attempts[d.attempts.length - 1];
  return [d.event_id, d.event_type, d.job_uuid, d.state, String(d.attempts.length), last?.error ?? (last ? 'ok' : '-')];
}

/** `endpoints ACTION …`: one action per call of the endpoint API. */
async function runEndpoints(base: Omit<Ctx, 'client' | 'json'>, args: string[]): Promise<number> {
  const action = args[0] && !args[0].startsWith('-') ? args[0] : 'list';
  const run = Object.hasOwn(ENDPOINT_ACTIONS, action) ? ENDPOINT_ACTIONS[action] : undefined;
  if (!run) throw new UsageError(`unknown action "${action}": one of ${Object.keys(ENDPOINT_ACTIONS).join(', ')}`);
  const rest = args[0] === action ? args.slice(1) : args;
  const positional = action === 'list' ? [] : action === 'add' ? ['URL'] : ['ID'];
  const { values, pos, help } = parse(
    rest,
    {
      event: { type: 'string', multiple: true },
      description: { type: 'string' },
      'endpoint-url': { type: 'string' },
      since: { type: 'string' },
      limit: { type: 'string' },
      cursor: { type: 'string' },
    },
    positional,
  );
  if (help) return usage(base, 'endpoints');
  const ctx = { ...base, client: makeClient(base.io, values.url), json: values.json === true };
  await run(ctx, pos[0]!, values);
  return 0;
}

function usage(base: Omit<Ctx, 'client' | 'json'>, cmd: ClientCommand): number {
  base.out(`usage: ${COMMANDS[cmd].usage}\n`);
  return 0;
}

/**
 * Runs one client command. `argv` starts with the command name (`['status', UUID]`).
 * Never throws: prints and returns the exit code.
 */
export async function runClientCommand(argv: string[], io: Partial<CliIO> = {}): Promise<number> {
  const full: CliIO = { stdout: process.stdout, stderr: process.stderr, env: process.env, ...io };
  const base = {
    io: full,
    out: (s: string) => void full.stdout.write(s),
    err: (s: string) => void full.stderr.write(s),
  };
  const [cmd, ...args] = argv;
  if (!isClientCommand(cmd)) {
    base.err(`media-jobs: unknown command "${cmd ?? ''}"\n${CLIENT_USAGE}\n`);
    return 2;
  }
  try {
    return await COMMANDS[cmd].run(base, args);
  } catch (err) {
    if (err instanceof UsageError) {
      base.err(`media-jobs ${cmd}: ${err.message}\nusage: ${COMMANDS[cmd].usage}\n`);
      return 2;
    }
    if (err instanceof WaitTimeoutError) {
      base.err(`media-jobs: ${err.message}\n`);
      return 1;
    }
    if (err instanceof MediaJobsError) {
      const where = [err.status ? `HTTP ${err.status}` : '', err.requestId ? `request ${err.requestId}` : '']
        .filter(Boolean)
        .join(', ');
      base.err(`media-jobs: ${err.message}${where ? ` (${where})` : ''}\n`);
      return 1;
    }
    base.err(`media-jobs: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}
