import { EventSourceParserStream } from 'eventsource-parser/stream';
import {
  isTerminalStatus,
  type ApiJob,
  type JobList,
  type JobStatus,
  type JobTypeInfo,
  type JobProgress,
  type BatchItem,
  type BatchItemResult,
  type ResultLink,
  type SubmitBody,
} from '../contract/api.js';
import {
  type Delivery,
  type EndpointDeliveryList,
  type NewWebhookEndpoint,
  type WebhookEndpoint,
  type WebhookEndpointChanges,
} from '../contract/webhook.js';
import { Backoff } from '../runtime/backoff.js';
import { Wakeable } from '../runtime/wake.js';

/**
 * A typed client of the media-jobs API V1.
 *
 *   const client = new MediaJobsClient({ baseUrl: 'http://localhost:8080', apiKey: process.env.MEDIA_JOBS_API_KEY! });
 *   const job = await client.submit('image-transform', { model: 'lanczos3', input: { source: url, width: 512 } });
 *   const done = await client.wait(job.uuid, { onUpdate: (j) => console.log(j.status, j.status_detail) });
 *   if (done.status === 'completed') await client.download(done.uuid, 'out.jpg');
 *
 * Transient failures (network errors, timeouts, 5xx and 429) are retried with backoff, honouring
 * Retry-After; a submit is retried with the same Idempotency-Key, so a retry never makes a second job.
 * Runs on Node 20+ (and anywhere with fetch; only download() needs Node's fs).
 */

export interface MediaJobsClientOptions {
  /** Where the service is, e.g. `http://localhost:8080` (a trailing `/api/v1` is accepted too). */
  baseUrl: string;
  apiKey: string;
  /** A fetch implementation; the global one by default. */
  fetch?: typeof globalThis.fetch;
  /** Per-request time limit in ms (a long poll adds its wait to it). Default 30 000. */
  timeoutMs?: number;
  /** Retries after the first attempt on network errors, timeouts, 5xx and 429. Default 3. */
  retries?: number;
  /** First backoff delay in ms; doubles each retry, with jitter. Default 250. */
  retryDelayMs?: number;
  /** Longest single wait before a retry (Retry-After included): beyond it the error is thrown. Default 30 000. */
  maxRetryDelayMs?: number;
  /** Sent as User-Agent. */
  userAgent?: string;
}

export interface RequestOptions {
  /** Aborts the call (and its retries). */
  signal?: AbortSignal;
}

export interface SubmitOptions extends RequestOptions {
  /** Idempotency-Key; a fresh random UUID by default, reused by the client's own retries. */
  idempotencyKey?: string;
  /** Cancel the job if it has not finished in this long: `"90s"`, `"5m"`, `"1h30m"` or seconds (1 s to 7 d). */
  cancelAfter?: string | number;
  /** −600..600 seconds: among your own queued jobs, taken as if submitted this much earlier. */
  priority?: number;
  /** Purge the job's data this long after it finished (at most the server's RESULT_RETENTION). */
  retention?: string | number;
}

export interface BatchOptions extends RequestOptions {
  /**
   * Idempotency-Key of the batch: an item without its own `idempotency_key` uses `KEY:INDEX`. A
   * fresh random UUID by default, reused by the client's own retries (which then replay every item).
   */
  idempotencyKey?: string;
}

export interface StatusOptions extends RequestOptions {
  /** Long-poll: let the server hold the request up to this many seconds (0–60) until the job is terminal. */
  wait?: number;
}

export interface ListJobsOptions extends RequestOptions {
  status?: JobStatus;
  jobType?: string;
  /** 1–100, default 20. */
  limit?: number;
  cursor?: string;
}

export interface WaitOptions extends RequestOptions {
  /** Give up after this long (throws WaitTimeoutError). No limit by default. */
  timeoutMs?: number;
  /** Called with the first state seen and then with every change (status, status_detail…). */
  onUpdate?: (job: ApiJob) => void;
  /**
   * Longest single long poll, seconds (1–60). The server answers the moment the job is terminal,
   * so this only bounds how stale intermediate states (for `onUpdate`) can get. Default 2 with
   * `onUpdate`, else 30.
   */
  longPollSeconds?: number;
  /** Polling interval when the server does not long-poll: starts here, grows ×1.5 up to 5 s. Default 500. */
  pollIntervalMs?: number;
}

export interface DownloadResult extends ResultLink {
  /** Where the file was written. */
  path: string;
}

/** An error answered by the API (status ≥ 400, message from the envelope) or no answer at all (status 0). */
export class MediaJobsError extends Error {
  override readonly name: string = 'MediaJobsError';
  /** The HTTP status; 0 when no response came (network error, timeout). */
  readonly status: number;
  /** The X-Request-Id of the failed response, to quote when reporting a problem. */
  readonly requestId: string | undefined;
  /** The parsed body, when there was one. */
  readonly body: unknown;
  /** From Retry-After, when the server sent one. */
  readonly retryAfterMs: number | undefined;

  constructor(
    message: string,
    init: { status: number; requestId?: string; body?: unknown; retryAfterMs?: number; cause?: unknown },
  ) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.status = init.status;
    this.requestId = init.requestId;
    this.body = init.body;
    this.retryAfterMs = init.retryAfterMs;
  }
}

/** wait() ran out of time; `job` is the last state seen. */
/** One message of `watch()`: a status change, or progress within a status. */
export interface JobEvent {
  type: 'status' | 'progress';
  job: ApiJob;
  /** The job's structured progress (`job.progress`): `{stage, percent, current?, total?}` or null. */
  progress: JobProgress | null;
}

export class WaitTimeoutError extends MediaJobsError {
  override readonly name = 'WaitTimeoutError';
  constructor(
    message: string,
    readonly job: ApiJob | undefined,
  ) {
    super(message, { status: 0 });
  }
}

interface Reply<T> {
  status: number;
  headers: Headers;
  data: T;
}

interface CallSpec extends RequestOptions {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  path: string;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  headers?: Record<string, string>;
  /** Extra time for this request (a long poll's wait). */
  extraTimeoutMs?: number;
}

/** The one sleep; an abort rejects (with the signal's reason), as a cancelled call does. */
async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  await Wakeable.sleep(ms, signal);
  if (signal?.aborted) throw signal.reason instanceof Error ? signal.reason : new Error('aborted');
}

function parseRetryAfter(v: string | null, now = Date.now()): number | undefined {
  if (!v) return undefined;
  if (/^\s*\d+\s*$/.test(v)) return Number(v) * 1000;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : Math.max(0, t - now);
}

const describeCause = (err: unknown): string => {
  const e = err as { message?: string; cause?: { code?: string; message?: string } } | null | undefined;
  const inner = e?.cause?.code ?? e?.cause?.message;
  const message = e?.message ?? String(err);
  return inner ? `${message} (${inner})` : message;
};

export class MediaJobsClient {
  /** The service root, without /api/v1. */
  readonly baseUrl: string;
  private readonly apiKey: string;
  private readonly fetchFn: typeof globalThis.fetch;
  private readonly timeoutMs: number;
  private readonly retries: number;
  /** Retry delays: retryDelayMs doubling to 8 s, jittered. */
  private readonly retryBackoff: Backoff;
  private readonly maxRetryDelayMs: number;
  private readonly userAgent: string;
  /** Learnt from the server's behaviour: false once it is seen to answer `?wait=` at once. */
  private longPoll = true;

  constructor(opts: MediaJobsClientOptions) {
    if (!opts.baseUrl) throw new TypeError('MediaJobsClient: baseUrl is required');
    if (!opts.apiKey) throw new TypeError('MediaJobsClient: apiKey is required');
    const u = new URL(opts.baseUrl);
    if (u.protocol !== 'http:' && u.protocol !== 'https:')
      throw new TypeError('MediaJobsClient: baseUrl must be an http or https URL');
    this.baseUrl = `${u.origin}${u.pathname.replace(/\/+$/, '').replace(/\/api\/v1$/, '')}`;
    this.apiKey = opts.apiKey;
    this.fetchFn = opts.fetch ?? globalThis.fetch.bind(globalThis);
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.retries = Math.max(0, opts.retries ?? 3);
    this.retryBackoff = new Backoff({ firstMs: opts.retryDelayMs ?? 250, maxMs: 8_000, jitter: 'half' });
    this.maxRetryDelayMs = opts.maxRetryDelayMs ?? 30_000;
    this.userAgent = opts.userAgent ?? 'media-jobs-client/1';
  }

  /** Submits a job. `job_type` is filled in from `jobType`. */
  async submit<I extends Record<string, unknown>>(
    jobType: string,
    body: SubmitBody<I>,
    opts: SubmitOptions = {},
  ): Promise<ApiJob> {
    const key = opts.idempotencyKey ?? globalThis.crypto.randomUUID();
    const extra = {
      ...(opts.cancelAfter === undefined ? {} : { cancel_after: opts.cancelAfter }),
      ...(opts.priority === undefined ? {} : { priority: opts.priority }),
      ...(opts.retention === undefined ? {} : { retention: opts.retention }),
    };
    const r = await this.call<ApiJob>({
      method: 'POST',
      path: `/jobs/submit/${encodeURIComponent(jobType)}`,
      body: { job_type: jobType, ...body, ...extra },
      headers: { 'idempotency-key': key },
      signal: opts.signal,
    });
    return r.data;
  }

  /** The job's current state; with `wait`, a long poll that answers as soon as the job is terminal. */
  async status(uuid: string, opts: StatusOptions = {}): Promise<ApiJob> {
    const wait = opts.wait === undefined ? undefined : Math.max(0, Math.min(60, Math.floor(opts.wait)));
    const r = await this.call<ApiJob>({
      method: 'GET',
      path: `/jobs/${encodeURIComponent(uuid)}/status`,
      query: { wait: wait || undefined },
      extraTimeoutMs: (wait ?? 0) * 1000,
      signal: opts.signal,
    });
    return r.data;
  }

  /** Cancels a queued or processing job; a terminal one gets a 409 MediaJobsError. */
  async cancel(uuid: string, opts: RequestOptions = {}): Promise<ApiJob> {
    let attempts = 0;
    try {
      const r = await this.call<ApiJob>({
        method: 'POST',
        path: `/jobs/${encodeURIComponent(uuid)}/cancel`,
        signal: opts.signal,
        onAttempt: () => attempts++,
      });
      return r.data;
    } catch (err) {
      // A retry after a lost response finds the job already cancelled: that is our own cancel.
      if (attempts > 1 && err instanceof MediaJobsError && err.status === 409) {
        const job = await this.status(uuid, opts);
        if (job.status === 'cancelled') return job;
      }
      throw err;
    }
  }

  /**
   * Submits up to 1,000 jobs in one request. Answers one result per item, in order: `status` is
   * what the item alone would have got (200, 400, 409…), `data` its job or `{}`. Items are
   * independent; retries (and a second call with the same `idempotencyKey`) replay every item.
   */
  async submitBatch(items: BatchItem[], opts: BatchOptions = {}): Promise<BatchItemResult[]> {
    const key = opts.idempotencyKey ?? globalThis.crypto.randomUUID();
    const r = await this.call<{ items: BatchItemResult[] }>({
      method: 'POST',
      path: '/jobs/batch',
      body: { jobs: items },
      headers: { 'idempotency-key': key },
      signal: opts.signal,
    });
    return r.data.items;
  }

  /**
   * Deletes a finished job's data (result, input, webhook) and returns the tombstone
   * (`data_removed: true`); a repeat answers the same. An active job is a 409 (cancel it first).
   */
  async delete(uuid: string, opts: RequestOptions = {}): Promise<ApiJob> {
    return (
      await this.call<ApiJob>({ method: 'DELETE', path: `/jobs/${encodeURIComponent(uuid)}`, signal: opts.signal })
    ).data;
  }

  /** The signed result link (409 while not ready, 410 after retention). */
  async result(uuid: string, opts: RequestOptions = {}): Promise<ResultLink> {
    return (
      await this.call<ResultLink>({
        method: 'GET',
        path: `/jobs/${encodeURIComponent(uuid)}/result`,
        signal: opts.signal,
      })
    ).data;
  }

  /** One page of the caller's jobs, newest first. */
  async listJobs(opts: ListJobsOptions = {}): Promise<JobList> {
    const r = await this.call<JobList>({
      method: 'GET',
      path: '/jobs',
      query: { status: opts.status, job_type: opts.jobType, limit: opts.limit, cursor: opts.cursor },
      signal: opts.signal,
    });
    return r.data;
  }

  /** Every job matching the filter, page after page. */
  async *iterateJobs(opts: Omit<ListJobsOptions, 'cursor'> = {}): AsyncGenerator<ApiJob> {
    let cursor: string | undefined;
    do {
      const page = await this.listJobs({ ...opts, cursor });
      yield* page.jobs;
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
  }

  /** The job types the service runs: slots, models, options and body schema. */
  async jobTypes(opts: RequestOptions = {}): Promise<JobTypeInfo[]> {
    return (await this.call<{ job_types: JobTypeInfo[] }>({ method: 'GET', path: '/job-types', signal: opts.signal }))
      .data.job_types;
  }

  /** A job's webhook events and their delivery attempts. */
  async webhookDeliveries(uuid: string, opts: RequestOptions = {}): Promise<Delivery[]> {
    const r = await this.call<{ deliveries: Delivery[] }>({
      method: 'GET',
      path: `/jobs/${encodeURIComponent(uuid)}/webhook-deliveries`,
      signal: opts.signal,
    });
    return r.data.deliveries;
  }

  /** Sends a webhook event again now (same event id and body). */
  async redeliverWebhook(uuid: string, eventId: string, opts: RequestOptions = {}): Promise<Delivery> {
    const r = await this.call<Delivery>({
      method: 'POST',
      path: `/jobs/${encodeURIComponent(uuid)}/webhook-deliveries/${encodeURIComponent(eventId)}/redeliver`,
      signal: opts.signal,
    });
    return r.data;
  }

  /** Registers an endpoint that receives every subscribed event of all your jobs; its `secret` signs them. */
  async createWebhookEndpoint(body: NewWebhookEndpoint, opts: RequestOptions = {}): Promise<WebhookEndpoint> {
    return (await this.call<WebhookEndpoint>({ method: 'POST', path: '/webhook-endpoints', body, signal: opts.signal }))
      .data;
  }

  /** Your endpoints, newest first. */
  async listWebhookEndpoints(opts: RequestOptions = {}): Promise<WebhookEndpoint[]> {
    const r = await this.call<{ endpoints: WebhookEndpoint[] }>({
      method: 'GET',
      path: '/webhook-endpoints',
      signal: opts.signal,
    });
    return r.data.endpoints;
  }

  async getWebhookEndpoint(id: string, opts: RequestOptions = {}): Promise<WebhookEndpoint> {
    return (await this.call<WebhookEndpoint>({ method: 'GET', path: endpointPath(id), signal: opts.signal })).data;
  }

  /** Changes the URL, the events or the description. */
  async updateWebhookEndpoint(
    id: string,
    changes: WebhookEndpointChanges,
    opts: RequestOptions = {},
  ): Promise<WebhookEndpoint> {
    return (
      await this.call<WebhookEndpoint>({ method: 'PATCH', path: endpointPath(id), body: changes, signal: opts.signal })
    ).data;
  }

  async deleteWebhookEndpoint(id: string, opts: RequestOptions = {}): Promise<void> {
    await this.call({ method: 'DELETE', path: endpointPath(id), signal: opts.signal });
  }

  /** A new secret; deliveries carry signatures with the old one too for WEBHOOK_SECRET_OVERLAP (24 h). */
  async rotateWebhookEndpointSecret(id: string, opts: RequestOptions = {}): Promise<string> {
    const r = await this.call<{ secret: string }>({
      method: 'POST',
      path: `${endpointPath(id)}/rotate-secret`,
      signal: opts.signal,
    });
    return r.data.secret;
  }

  /** Turns a disabled endpoint back on (what was skipped meanwhile stays skipped: see recover). */
  async enableWebhookEndpoint(id: string, opts: RequestOptions = {}): Promise<WebhookEndpoint> {
    return (
      await this.call<WebhookEndpoint>({ method: 'POST', path: `${endpointPath(id)}/enable`, signal: opts.signal })
    ).data;
  }

  /** Queues again every failed or skipped delivery of events since `since`; returns how many. */
  async recoverWebhookEndpoint(id: string, since: Date | string, opts: RequestOptions = {}): Promise<number> {
    const r = await this.call<{ count: number }>({
      method: 'POST',
      path: `${endpointPath(id)}/recover`,
      body: { since: since instanceof Date ? since.toISOString() : since },
      signal: opts.signal,
    });
    return r.data.count;
  }

  /** One page of an endpoint's deliveries with their attempts, newest first. */
  async webhookEndpointDeliveries(
    id: string,
    opts: RequestOptions & { limit?: number; cursor?: string } = {},
  ): Promise<EndpointDeliveryList> {
    const r = await this.call<EndpointDeliveryList>({
      method: 'GET',
      path: `${endpointPath(id)}/deliveries`,
      query: { limit: opts.limit, cursor: opts.cursor },
      signal: opts.signal,
    });
    return r.data;
  }

  /**
   * Waits until the job is terminal and returns it (completed, failed or cancelled: a failed job is
   * returned, not thrown). Long-polls with `?wait=` and falls back to polling with backoff when the
   * server answers at once.
   */
  async wait(uuid: string, opts: WaitOptions = {}): Promise<ApiJob> {
    const deadline = opts.timeoutMs === undefined ? Infinity : Date.now() + opts.timeoutMs;
    const maxPoll = Math.max(1, Math.min(60, Math.floor(opts.longPollSeconds ?? (opts.onUpdate ? 2 : 30))));
    // Polling (no long poll): every pollIntervalMs at first, growing ×1.5 to 5 s while nothing changes.
    const poll = new Backoff({ firstMs: opts.pollIntervalMs ?? 500, maxMs: 5_000, factor: 1.5 });
    let last: ApiJob | undefined;
    let lastSeen = '';
    let earlyAnswers = 0;
    for (;;) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) {
        throw new WaitTimeoutError(
          `timed out after ${Math.round((opts.timeoutMs ?? 0) / 1000)} s waiting for job ${uuid}${last ? ` (last seen ${last.status}: ${last.status_detail})` : ''}`,
          last,
        );
      }
      // The first call answers at once, so onUpdate sees the current state immediately.
      const first = last === undefined;
      const waitS = this.longPoll && !first ? Math.min(maxPoll, Math.floor(remaining / 1000)) : 0;
      const started = Date.now();
      let job: ApiJob;
      try {
        job = await this.status(uuid, { wait: waitS, signal: opts.signal });
      } catch (err) {
        // A server that rejects the parameter: poll without it.
        if (waitS > 0 && err instanceof MediaJobsError && err.status === 400) {
          this.longPoll = false;
          continue;
        }
        throw err;
      }
      const seen = JSON.stringify(job);
      const changed = seen !== lastSeen;
      if (changed) {
        last = job;
        lastSeen = seen;
        opts.onUpdate?.(job);
      }
      if (isTerminalStatus(job.status)) return job;
      if (waitS > 0) {
        if (changed || Date.now() - started >= (waitS * 1000) / 2) continue;
        // Nothing changed, yet it answered well before the wait was up: twice, and it does not long-poll.
        if (++earlyAnswers >= 2) this.longPoll = false;
      } else if (first && this.longPoll) {
        continue;
      }
      if (changed) poll.reset();
      await sleep(Math.max(0, Math.min(poll.next(), deadline - Date.now())), opts.signal);
    }
  }

  /**
   * Follows a job through `GET /api/v1/jobs/{uuid}/events` (Server-Sent Events): yields a `status`
   * event for the current state and each status change, a `progress` event when only
   * `status_detail` or the structured `progress` changes (`e.progress`: `{stage, percent, current?,
   * total?}`; the server sends at most one every 500 ms), and returns after the terminal state. A dropped connection is
   * reopened (with the same retries and backoff as other calls); a state already yielded is not
   * yielded again.
   *
   *   for await (const e of client.watch(job.uuid)) console.log(e.type, e.job.status, e.job.status_detail);
   */
  async *watch(uuid: string, opts: RequestOptions = {}): AsyncGenerator<JobEvent, ApiJob | undefined> {
    const url = new URL(`${this.baseUrl}/api/v1/jobs/${encodeURIComponent(uuid)}/events`);
    const headers = {
      accept: 'text/event-stream',
      authorization: `Bearer ${this.apiKey}`,
      'user-agent': this.userAgent,
    };
    let last: ApiJob | undefined;
    let failures = 0;
    for (;;) {
      let res: Response;
      try {
        // Connecting has the usual time limit; an open stream has none (it may wait for hours).
        const connect = AbortSignal.timeout(this.timeoutMs);
        const ctrl = new AbortController();
        const onAbort = () => ctrl.abort(opts.signal?.reason);
        opts.signal?.addEventListener('abort', onAbort, { once: true });
        const timer = setTimeout(() => ctrl.abort(connect.reason), this.timeoutMs);
        try {
          res = await this.fetchFn(url, { headers, signal: ctrl.signal });
        } finally {
          clearTimeout(timer);
        }
        if (!res.ok) {
          const err = this.errorFrom(res, await res.text(), `GET ${url.pathname} failed`);
          opts.signal?.removeEventListener('abort', onAbort);
          if ((res.status >= 500 || res.status === 429) && failures < this.retries) {
            await sleep(err.retryAfterMs ?? this.backoff(failures++), opts.signal);
            continue;
          }
          throw err;
        }
        const events = res.body!.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
        try {
          for await (const msg of events) {
            failures = 0;
            if (msg.event === 'error') break; // the server could not read the job: reconnect
            if (msg.event !== 'status' && msg.event !== 'progress') continue;
            const job = JSON.parse(msg.data) as ApiJob;
            const type: JobEvent['type'] = !last || last.status !== job.status ? 'status' : 'progress';
            if (
              last &&
              last.status === job.status &&
              last.status_detail === job.status_detail &&
              JSON.stringify(last.progress) === JSON.stringify(job.progress)
            )
              continue;
            last = job;
            yield { type, job, progress: job.progress ?? null };
            if (isTerminalStatus(job.status)) {
              ctrl.abort();
              return job;
            }
          }
        } finally {
          opts.signal?.removeEventListener('abort', onAbort);
        }
      } catch (err) {
        if (opts.signal?.aborted) throw opts.signal.reason;
        if (err instanceof MediaJobsError) throw err;
        if (failures >= this.retries)
          throw new MediaJobsError(`GET ${url.pathname} failed: ${describeCause(err)}`, { status: 0, cause: err });
      }
      // The stream ended early (a proxy, a restart): reconnect after a backoff.
      await sleep(this.backoff(failures++), opts.signal);
    }
  }

  /**
   * Downloads a completed job's result to `filePath` (written to a temporary file beside it, then
   * renamed, so a partial file never appears under the name). Node only.
   */
  async download(uuid: string, filePath: string, opts: RequestOptions = {}): Promise<DownloadResult> {
    const [{ createWriteStream }, fsp, { Readable, Transform }, { pipeline }] = await Promise.all([
      import('node:fs'),
      import('node:fs/promises'),
      import('node:stream'),
      import('node:stream/promises'),
    ]);
    let lastError: unknown;
    for (let attempt = 0; attempt <= this.retries; attempt++) {
      if (attempt > 0) await sleep(this.backoff(attempt - 1), opts.signal);
      // A fresh link each attempt: an expired one (403) is renewed.
      const link = await this.result(uuid, opts);
      const headersTimeout = new AbortController();
      const timer = setTimeout(
        () => headersTimeout.abort(new Error(`no response within ${this.timeoutMs} ms`)),
        this.timeoutMs,
      );
      const signal = opts.signal ? AbortSignal.any([opts.signal, headersTimeout.signal]) : headersTimeout.signal;
      let res: Response;
      try {
        // No Authorization header: the signed URL is the credential (and may point at S3).
        res = await this.fetchFn(link.url, { signal, headers: { 'user-agent': this.userAgent } });
      } catch (err) {
        clearTimeout(timer);
        if (opts.signal?.aborted) throw opts.signal.reason;
        lastError = new MediaJobsError(`download of ${uuid} failed: ${describeCause(err)}`, { status: 0, cause: err });
        continue;
      }
      clearTimeout(timer);
      if (!res.ok || !res.body) {
        const text = await res.text().catch(() => '');
        const err = this.errorFrom(res, text, `download of ${uuid} failed`);
        if (res.status >= 500 || res.status === 429 || res.status === 403) {
          lastError = err;
          continue;
        }
        throw err;
      }
      const tmp = `${filePath}.${globalThis.crypto.randomUUID().slice(0, 8)}.part`;
      let bytes = 0;
      const count = new Transform({
        transform(chunk: Buffer, _enc, cb) {
          bytes += chunk.length;
          cb(null, chunk);
        },
      });
      try {
        await pipeline(
          Readable.fromWeb(res.body as import('node:stream/web').ReadableStream),
          count,
          createWriteStream(tmp),
          { signal: opts.signal },
        );
        if (bytes !== link.size_bytes)
          throw new MediaJobsError(`download of ${uuid} is truncated: ${bytes} of ${link.size_bytes} bytes`, {
            status: 0,
          });
        await fsp.rename(tmp, filePath);
        return { ...link, path: filePath };
      } catch (err) {
        await fsp.rm(tmp, { force: true });
        if (opts.signal?.aborted) throw opts.signal.reason;
        lastError =
          err instanceof MediaJobsError
            ? err
            : new MediaJobsError(`download of ${uuid} failed: ${describeCause(err)}`, { status: 0, cause: err });
      }
    }
    throw lastError;
  }

  private backoff(retry: number): number {
    return this.retryBackoff.delay(retry);
  }

  private errorFrom(res: Response, text: string, fallback: string): MediaJobsError {
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      /* not JSON: a proxy's error page, say */
    }
    const envelopeMessage = (body as { message?: unknown } | null)?.message;
    const message =
      typeof envelopeMessage === 'string' && envelopeMessage
        ? envelopeMessage
        : `${fallback}: HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ''}`;
    return new MediaJobsError(message, {
      status: res.status,
      requestId: res.headers.get('x-request-id') ?? undefined,
      body,
      retryAfterMs: parseRetryAfter(res.headers.get('retry-after')),
    });
  }

  /** One API call with retries; unwraps the envelope. */
  private async call<T>(spec: CallSpec & { onAttempt?: () => void }): Promise<Reply<T>> {
    const url = new URL(`${this.baseUrl}/api/v1${spec.path}`);
    for (const [k, v] of Object.entries(spec.query ?? {}))
      if (v !== undefined && v !== '') url.searchParams.set(k, String(v));
    const headers: Record<string, string> = {
      accept: 'application/json',
      authorization: `Bearer ${this.apiKey}`,
      'user-agent': this.userAgent,
      ...spec.headers,
    };
    let body: string | undefined;
    if (spec.body !== undefined) {
      body = JSON.stringify(spec.body);
      headers['content-type'] = 'application/json';
    }
    for (let attempt = 0; ; attempt++) {
      spec.onAttempt?.();
      const canRetry = attempt < this.retries;
      const limit = AbortSignal.timeout(this.timeoutMs + (spec.extraTimeoutMs ?? 0));
      const signal = spec.signal ? AbortSignal.any([spec.signal, limit]) : limit;
      let res: Response;
      let text: string;
      try {
        res = await this.fetchFn(url, { method: spec.method, headers, body, signal });
        text = await res.text();
      } catch (err) {
        if (spec.signal?.aborted) throw spec.signal.reason;
        const what = limit.aborted
          ? `timed out after ${this.timeoutMs + (spec.extraTimeoutMs ?? 0)} ms`
          : describeCause(err);
        const e = new MediaJobsError(`${spec.method} ${url.pathname} failed: ${what}`, { status: 0, cause: err });
        if (!canRetry) throw e;
        await sleep(this.backoff(attempt), spec.signal);
        continue;
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      const env = parsed as { code?: unknown; data?: unknown } | undefined;
      if (res.ok && env && env.code === 0 && typeof env.data === 'object' && env.data !== null) {
        return { status: res.status, headers: res.headers, data: env.data as T };
      }
      const err = this.errorFrom(
        res,
        text,
        res.ok ? `${spec.method} ${url.pathname}: unexpected response` : `${spec.method} ${url.pathname} failed`,
      );
      if (canRetry && (res.status >= 500 || res.status === 429)) {
        const delay = err.retryAfterMs ?? this.backoff(attempt);
        if (delay <= this.maxRetryDelayMs) {
          await sleep(delay, spec.signal);
          continue;
        }
      }
      throw err;
    }
  }
}

const endpointPath = (id: string) => `/webhook-endpoints/${encodeURIComponent(id)}`;
