/**
 * The remote worker protocol's HTTP calls (docs/workers.md), one method each. Errors carry the
 * HTTP status so the runner can tell "stop for good" (401/403), "drop this job" (409) and
 * "back off and retry" (network errors, 5xx) apart.
 */
import type { ErrorType } from '../contract/api.js';
import type {
  ClaimAnswer,
  ClaimedJob,
  CompleteAnswer,
  FailAnswer,
  FailRequest,
  HeartbeatAnswer,
  HeartbeatRequest,
  LeaseRequest,
  OutputAnswer,
  ReleaseAnswer,
} from '../contract/worker.js';

export class WorkerHttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'WorkerHttpError';
  }
}

/** True for failures worth retrying: the network, timeouts, 429 and 5xx (never an abort). */
export function isTransient(err: unknown): boolean {
  if (err instanceof WorkerHttpError) return err.status === 429 || err.status >= 500;
  return !(err instanceof Error && (err.name === 'AbortError' || err.name === 'TimeoutError'));
}

/** A claimed job and how long its lease lasts, measured on the service's clock. */
export interface Claim {
  job: ClaimedJob;
  /** Milliseconds of lease left when the answer left the service (never below 1 s). */
  leaseMs: number;
}

export class WorkerClient {
  private readonly base: string;

  constructor(
    url: string,
    private readonly token: string,
  ) {
    this.base = `${url.replace(/\/+$/, '')}/api/v1/worker`;
  }

  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- the caller names the response shape it expects
  private async call<T>(
    method: string,
    path: string,
    body: unknown,
    signal?: AbortSignal,
    raw?: { bytes: Uint8Array; contentType: string },
  ): Promise<{ data: T; date: string | null }> {
    const res = await fetch(`${this.base}${path}`, {
      method,
      headers: { authorization: `Bearer ${this.token}`, 'content-type': raw ? raw.contentType : 'application/json' },
      body: raw ? bodyOf(raw.bytes) : JSON.stringify(body),
      signal,
    });
    const text = await res.text();
    let env: { code?: number; message?: string; data?: T } = {};
    try {
      env = JSON.parse(text) as typeof env;
    } catch {
      /* not the envelope: a proxy's page */
    }
    // The lease token rides in the output call's query: keep it out of error messages (and logs).
    const where = `${method} ${path.split('?')[0]}`;
    if (res.status !== 200)
      throw new WorkerHttpError(res.status, `${where}: HTTP ${res.status}: ${env.message ?? text.slice(0, 200)}`);
    if (env.data === undefined)
      throw new WorkerHttpError(502, `${where}: HTTP 200 without the API's envelope (a proxy in the way?)`);
    return { data: env.data, date: res.headers.get('date') };
  }

  /** Claims a job, long-polling up to `waitSeconds`; null when none came. */
  async claim(jobTypes: string[], waitSeconds: number, signal?: AbortSignal): Promise<Claim | null> {
    const { data, date } = await this.call<ClaimAnswer>(
      'POST',
      '/claim',
      { job_types: jobTypes, wait: waitSeconds },
      signal,
    );
    return data.job ? { job: data.job, leaseMs: leaseLeft(data.job.lease_expires_at, date, Date.now()) } : null;
  }

  async heartbeat(
    uuid: string,
    lease: string,
    detail?: string,
    progress?: HeartbeatRequest['progress'],
  ): Promise<HeartbeatAnswer> {
    const body: HeartbeatRequest = { lease_token: lease, status_detail: detail, progress };
    return (await this.call<HeartbeatAnswer>('POST', `/jobs/${uuid}/heartbeat`, body)).data;
  }

  async output(uuid: string, lease: string, bytes: Uint8Array, contentType: string): Promise<OutputAnswer> {
    return (
      await this.call<OutputAnswer>(
        'PUT',
        `/jobs/${uuid}/output?lease_token=${encodeURIComponent(lease)}`,
        undefined,
        undefined,
        { bytes, contentType },
      )
    ).data;
  }

  async complete(uuid: string, lease: string): Promise<CompleteAnswer> {
    const body: LeaseRequest = { lease_token: lease };
    return (await this.call<CompleteAnswer>('POST', `/jobs/${uuid}/complete`, body)).data;
  }

  async fail(
    uuid: string,
    lease: string,
    errorType: ErrorType,
    message: string,
    retryable: boolean,
  ): Promise<FailAnswer> {
    const body: FailRequest = {
      lease_token: lease,
      error_type: errorType,
      error_message: message.slice(0, 1000) || 'failed',
      retryable,
    };
    return (await this.call<FailAnswer>('POST', `/jobs/${uuid}/fail`, body)).data;
  }

  async release(uuid: string, lease: string): Promise<ReleaseAnswer> {
    const body: LeaseRequest = { lease_token: lease };
    return (await this.call<ReleaseAnswer>('POST', `/jobs/${uuid}/release`, body)).data;
  }

  /** Downloads a staged input (a signed URL: no credentials). */
  async download(url: string, signal?: AbortSignal): Promise<{ bytes: Buffer; contentType: string }> {
    const res = await fetch(url, { signal });
    if (res.status !== 200) {
      await res.body?.cancel();
      throw new WorkerHttpError(res.status, `GET staged input: HTTP ${res.status}`);
    }
    return {
      bytes: Buffer.from(await res.arrayBuffer()),
      contentType: res.headers.get('content-type') ?? 'application/octet-stream',
    };
  }
}

/** The bytes as fetch takes them: no copy unless they sit in shared memory (a 200 MB output is not copied). */
function bodyOf(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  return bytes.buffer instanceof ArrayBuffer ? (bytes as Uint8Array<ArrayBuffer>) : new Uint8Array(bytes);
}

/**
 * The lease left, free of clock skew between worker and service: `lease_expires_at` is the
 * service's clock. When ours agrees with its `Date` header (1 s resolution) ours is the finer
 * measure; when it does not, the header is the only honest one (taken 1 s short, since the header
 * truncates).
 */
export function leaseLeft(expiresAt: string, dateHeader: string | null, now: number): number {
  const expires = Date.parse(expiresAt);
  const serverNow = dateHeader ? Date.parse(dateHeader) : NaN;
  const ours = expires - now;
  const left = Number.isNaN(serverNow) || Math.abs(now - serverNow) <= 2_000 ? ours : expires - serverNow - 1_000;
  return Number.isFinite(left) ? Math.max(1_000, left) : 1_000;
}
