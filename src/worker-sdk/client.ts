/**
 * The remote worker protocol's HTTP calls (docs/workers.md), one method each. Errors carry the
 * HTTP status so the runner can tell "stop for good" (401/403), "drop this job" (409) and
 * "back off and retry" (network errors, 5xx) apart.
 */
import type { ClaimedJob } from '../remote/protocol.js';

export type { ClaimedJob };

export class WorkerHttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'WorkerHttpError';
  }
}

/** True for failures worth retrying: the network, timeouts, 429 and 5xx. */
export function isTransient(err: unknown): boolean {
  if (err instanceof WorkerHttpError) return err.status === 429 || err.status >= 500;
  return !(err instanceof Error && err.name === 'AbortError');
}

export class WorkerClient {
  private readonly base: string;

  constructor(
    url: string,
    private readonly token: string,
  ) {
    this.base = `${url.replace(/\/+$/, '')}/api/v1/worker`;
  }

  private async call<T>(method: string, path: string, body: unknown, signal?: AbortSignal, raw?: { bytes: Uint8Array; contentType: string }): Promise<T> {
    const res = await fetch(`${this.base}${path}`, {
      method,
      headers: { authorization: `Bearer ${this.token}`, 'content-type': raw ? raw.contentType : 'application/json' },
      body: raw ? new Uint8Array(raw.bytes) : JSON.stringify(body),
      signal,
    });
    const text = await res.text();
    let env: { code?: number; message?: string; data?: T } = {};
    try {
      env = JSON.parse(text) as typeof env;
    } catch {
      /* not the envelope: a proxy's page */
    }
    if (res.status !== 200) throw new WorkerHttpError(res.status, `${method} ${path}: HTTP ${res.status}: ${env.message ?? text.slice(0, 200)}`);
    return env.data as T;
  }

  async claim(jobTypes: string[], waitSeconds: number, signal?: AbortSignal): Promise<ClaimedJob | null> {
    return (await this.call<{ job: ClaimedJob | null }>('POST', '/claim', { job_types: jobTypes, wait: waitSeconds }, signal)).job;
  }

  heartbeat(uuid: string, lease: string, detail?: string, progress?: number): Promise<{ lease_expires_at: string; cancel_requested: boolean }> {
    return this.call('POST', `/jobs/${uuid}/heartbeat`, { lease_token: lease, status_detail: detail, progress });
  }

  output(uuid: string, lease: string, bytes: Uint8Array, contentType: string): Promise<{ content_type: string; size: number }> {
    return this.call('PUT', `/jobs/${uuid}/output?lease_token=${encodeURIComponent(lease)}`, undefined, undefined, { bytes, contentType });
  }

  complete(uuid: string, lease: string): Promise<{ status: 'completed' }> {
    return this.call('POST', `/jobs/${uuid}/complete`, { lease_token: lease });
  }

  fail(uuid: string, lease: string, errorType: string, message: string, retryable: boolean): Promise<{ status: 'failed' | 'queued' }> {
    return this.call('POST', `/jobs/${uuid}/fail`, { lease_token: lease, error_type: errorType, error_message: message.slice(0, 1000) || 'failed', retryable });
  }

  release(uuid: string, lease: string): Promise<{ status: 'queued' }> {
    return this.call('POST', `/jobs/${uuid}/release`, { lease_token: lease });
  }

  /** Downloads a staged input (a signed URL: no credentials). */
  async download(url: string, signal?: AbortSignal): Promise<{ bytes: Buffer; contentType: string }> {
    const res = await fetch(url, { signal });
    if (res.status !== 200) throw new WorkerHttpError(res.status, `GET staged input: HTTP ${res.status}`);
    return { bytes: Buffer.from(await res.arrayBuffer()), contentType: res.headers.get('content-type') ?? 'application/octet-stream' };
  }
}
