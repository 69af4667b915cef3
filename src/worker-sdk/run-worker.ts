import { isTransient, WorkerClient, WorkerHttpError, type ClaimedJob } from './client.js';

const SLOTS = ['source', 'target', 'reference', 'audio'] as const;
export type MediaSlot = (typeof SLOTS)[number];

/** A claimed job as the handler sees it. */
export interface WorkerJob {
  uuid: string;
  jobType: string;
  model: string;
  attempt: number;
  /** The client's input; media slots hold arrays of signed URLs to the service's staged copies. */
  input: Record<string, unknown>;
  /** The media slots alone: signed, expiring URLs, no credentials needed. */
  media: Partial<Record<MediaSlot, string[]>>;
}

export interface JobContext {
  /** Aborted when the client cancels, the job times out, the lease is lost, or the worker stops. */
  signal: AbortSignal;
  /** Shown in the job's public status (sent with the next heartbeat, at once if none is in flight). */
  progress(detail: string, fraction?: number): void;
  /** Downloads a staged input URL. */
  download(url: string): Promise<{ bytes: Buffer; contentType: string }>;
}

export interface JobOutput {
  bytes: Buffer | Uint8Array;
  contentType: string;
}

/** Throw it from a handler to fail the job with this `error_type` (retryable: another attempt may succeed). */
export class WorkerJobError extends Error {
  readonly retryable: boolean;
  constructor(
    readonly errorType: 'media_fetch_failed' | 'invalid_media' | 'processing_error' | 'timeout' | 'internal_error',
    message: string,
    opts: { retryable?: boolean } = {},
  ) {
    super(message);
    this.name = 'WorkerJobError';
    this.retryable = opts.retryable ?? false;
  }
}

export interface RunWorkerOptions {
  /** The service's base URL, e.g. https://jobs.example.com */
  url: string;
  /** A worker token (mjw_…) from `media-jobs workers create-token`. */
  token: string;
  jobTypes: string[];
  /** Jobs run at once (default 1). */
  concurrency?: number;
  handle(job: WorkerJob, ctx: JobContext): Promise<JobOutput>;
  /** Long-poll length of each claim, 0–30 s (default 30). */
  waitSeconds?: number;
  /** Heartbeat at most this often apart (default: a third of the lease the service grants). */
  heartbeatMs?: number;
  /** Where the worker reports what it does (default: nowhere). */
  log?: (message: string, fields?: Record<string, unknown>) => void;
}

export interface RemoteWorker {
  /** Stops claiming, lets running jobs finish for `graceMs` (default 30 s), then aborts and releases them. */
  stop(graceMs?: number): Promise<void>;
  /** Settles when the worker has stopped; rejects if it had to stop (a revoked token, a refused job type). */
  done: Promise<void>;
  /** Jobs running now. */
  readonly active: number;
}

type Why = 'cancelled' | 'lost' | 'stop';
class Stopped extends Error {
  constructor(readonly why: Why) {
    super(`job stopped: ${why}`);
    this.name = 'AbortError';
  }
}

/**
 * Runs a remote worker: `concurrency` loops, each long-polling for a job, running `handle` with
 * heartbeats, uploading its output and completing (or failing) the job. Network errors and 5xx
 * answers back off and retry; a 409 drops the job (someone else holds it now).
 */
export function runWorker(opts: RunWorkerOptions): RemoteWorker {
  const client = new WorkerClient(opts.url, opts.token);
  const log = opts.log ?? (() => {});
  const slots = Math.max(1, opts.concurrency ?? 1);
  const wait = Math.min(30, Math.max(0, opts.waitSeconds ?? 30));
  const stopping = new AbortController();
  const running = new Map<string, AbortController>();
  let fatal: Error | undefined;

  const sleep = (ms: number) =>
    new Promise<void>((r) => {
      const t = setTimeout(done, ms);
      stopping.signal.addEventListener('abort', done, { once: true });
      function done() {
        clearTimeout(t);
        r();
      }
    });

  async function loop(): Promise<void> {
    let backoff = 0;
    while (!stopping.signal.aborted) {
      let job: ClaimedJob | null;
      try {
        job = await client.claim(opts.jobTypes, wait, stopping.signal);
        backoff = 0;
      } catch (err) {
        if (stopping.signal.aborted) return;
        if (!isTransient(err)) {
          fatal ??= err as Error;
          log('worker stopping: the service refused it', { error: (err as Error).message });
          stopping.abort();
          return;
        }
        backoff = Math.min(5_000, Math.max(100, backoff * 2));
        log('claim failed; retrying', { error: (err as Error).message, retry_in_ms: backoff });
        await sleep(backoff);
        continue;
      }
      if (!job) continue;
      if (stopping.signal.aborted) {
        await client.release(job.uuid, job.lease_token).catch(() => {});
        return;
      }
      await runJob(job);
    }
  }

  async function runJob(job: ClaimedJob): Promise<void> {
    const controller = new AbortController();
    running.set(job.uuid, controller);
    const lease = job.lease_token;
    const leaseMs = Math.max(1_000, Date.parse(job.lease_expires_at) - Date.now());
    const every = Math.max(200, Math.min(opts.heartbeatMs ?? Infinity, Math.floor(leaseMs / 3)));
    let detail: { text: string; fraction?: number | undefined } | undefined;
    let beating: Promise<void> | undefined;
    let again = false;
    const beat = (): void => {
      if (beating) {
        again = true;
        return;
      }
      const d = detail;
      detail = undefined;
      beating = client
        .heartbeat(job.uuid, lease, d?.text, d?.fraction)
        .then((r) => {
          if (r.cancel_requested) controller.abort(new Stopped('cancelled'));
        })
        .catch((err: unknown) => {
          if (err instanceof WorkerHttpError && err.status === 409) controller.abort(new Stopped('lost'));
          else if (err instanceof WorkerHttpError && (err.status === 401 || err.status === 403)) controller.abort(new Stopped('lost'));
          // Transient: the next beat tries again while the lease lasts.
        })
        .finally(() => {
          beating = undefined;
          if (again && !controller.signal.aborted) {
            again = false;
            beat();
          }
        });
    };
    const timer = setInterval(beat, every);
    const ctx: JobContext = {
      signal: controller.signal,
      progress(text, fraction) {
        if (controller.signal.aborted) return;
        detail = { text: text.slice(0, 200), fraction: fraction === undefined ? undefined : Math.min(1, Math.max(0, fraction)) };
        beat();
      },
      download: (url) => client.download(url, controller.signal),
    };
    const media: WorkerJob['media'] = {};
    for (const s of SLOTS) if (Array.isArray(job.input[s])) media[s] = job.input[s] as string[];
    const why = () => (controller.signal.reason instanceof Stopped ? controller.signal.reason.why : undefined);
    log('job started', { job_uuid: job.uuid, job_type: job.job_type, attempt: job.attempt });
    try {
      let out: JobOutput;
      try {
        out = await opts.handle({ uuid: job.uuid, jobType: job.job_type, model: job.model, attempt: job.attempt, input: job.input, media }, ctx);
      } catch (err) {
        await settle(job, why(), err);
        return;
      }
      if (controller.signal.aborted) return settle(job, why(), undefined);
      clearInterval(timer);
      await beating;
      await client.output(job.uuid, lease, out.bytes, out.contentType);
      await client.complete(job.uuid, lease);
      log('job completed', { job_uuid: job.uuid });
    } catch (err) {
      // Recording the outcome failed: a 409 means the job is someone else's now; otherwise the
      // lease runs out and the service gives the job to another attempt.
      log('could not record the job outcome', { job_uuid: job.uuid, error: (err as Error).message });
    } finally {
      clearInterval(timer);
      running.delete(job.uuid);
    }

    async function settle(j: ClaimedJob, stopped: Why | undefined, err: unknown): Promise<void> {
      clearInterval(timer);
      await beating;
      if (stopped === 'cancelled' || stopped === 'lost') {
        log('job dropped', { job_uuid: j.uuid, why: stopped });
      } else if (stopped === 'stop') {
        await client.release(j.uuid, lease);
        log('job released', { job_uuid: j.uuid });
      } else if (err instanceof WorkerJobError) {
        const r = await client.fail(j.uuid, lease, err.errorType, err.message, err.retryable);
        log('job failed', { job_uuid: j.uuid, error_type: err.errorType, now: r.status });
      } else if (err !== undefined) {
        await client.fail(j.uuid, lease, 'processing_error', err instanceof Error ? err.message : String(err), false);
        log('job failed', { job_uuid: j.uuid, error: err instanceof Error ? err.message : String(err) });
      }
    }
  }

  const loops = Promise.all(Array.from({ length: slots }, () => loop()));
  const done = loops.then(() => {
    if (fatal) throw fatal;
  });
  done.catch(() => {}); // observed through `done` by the caller; never an unhandled rejection here
  return {
    done,
    get active() {
      return running.size;
    },
    async stop(graceMs = 30_000) {
      stopping.abort();
      const deadline = Date.now() + graceMs;
      while (running.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      for (const c of running.values()) c.abort(new Stopped('stop'));
      await loops;
    },
  };
}
