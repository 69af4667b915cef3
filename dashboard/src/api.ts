import { EventSourceParserStream } from 'eventsource-parser/stream';
import { isTerminalStatus } from '../../src/contract/api.js';

/** Credentials live in this tab's sessionStorage only and travel as Bearer headers, never cookies. */
const KEY = 'media-jobs.api-key';
const ADMIN = 'media-jobs.admin-token';

export const session = {
  apiKey: () => sessionStorage.getItem(KEY),
  adminToken: () => sessionStorage.getItem(ADMIN),
  setApiKey: (k: string | null) => (k ? sessionStorage.setItem(KEY, k) : sessionStorage.removeItem(KEY)),
  setAdminToken: (t: string | null) => (t ? sessionStorage.setItem(ADMIN, t) : sessionStorage.removeItem(ADMIN)),
};

// The API's shapes come from the typed client (type-only: nothing of it is bundled).
import type { ApiJob, JobTypeInfo, SlotSpec } from '../../src/contract/api.js';
import type { DeliveryAttempt } from '../../src/contract/webhook.js';

export type Job = ApiJob;
export type Attempt = DeliveryAttempt;

export interface JobDetail extends Job {
  input: Record<string, unknown>;
  webhook: { url: string; events?: string[] } | null;
}
/** The subset of JSON Schema the new-job form renders. */
export interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  enum?: unknown[];
  default?: unknown;
  minimum?: number;
  maximum?: number;
  description?: string;
  anyOf?: JsonSchema[];
}
// Slots indexed by any input key: the job page looks up each field of an input by name.
export type JobType = Omit<JobTypeInfo, 'options' | 'slots'> & {
  slots: Partial<Record<string, SlotSpec>>;
  options: JsonSchema;
};

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

async function request<T>(
  path: string,
  token: string | null,
  init: { method?: string; body?: unknown } = {},
): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (token) headers.authorization = `Bearer ${token}`;
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, {
    method: init.method ?? 'GET',
    headers,
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
    credentials: 'omit',
  });
  let env: { code?: number; message?: string; data?: unknown } | undefined;
  try {
    env = (await res.json()) as typeof env;
  } catch {
    /* not JSON */
  }
  if (!res.ok || env?.code !== 0) throw new ApiError(res.status, env?.message ?? `HTTP ${res.status}`);
  return env.data as T;
}

/** The public API, as the signed-in API user. */
export const api = <T>(path: string, init?: { method?: string; body?: unknown }) =>
  request<T>(`/api/v1${path}`, session.apiKey(), init);
/** The operator routes, with the admin token. */
export const admin = <T>(path: string, init?: { method?: string; body?: unknown }) =>
  request<T>(`/admin/api${path}`, session.adminToken(), init);

/**
 * Follows GET /api/v1/jobs/{uuid}/events (fetch, not EventSource: EventSource cannot send the
 * Bearer header). Calls `onJob` for every event; reconnects after a drop until the job is
 * terminal or `signal` aborts.
 */
export async function watchJob(
  uuid: string,
  onJob: (job: Job, kind: string) => void,
  signal: AbortSignal,
): Promise<void> {
  let delay = 1000;
  while (!signal.aborted) {
    try {
      const res = await fetch(`/api/v1/jobs/${uuid}/events`, {
        headers: { accept: 'text/event-stream', authorization: `Bearer ${session.apiKey() ?? ''}` },
        credentials: 'omit',
        signal,
      });
      if (!res.ok || !res.body) throw new ApiError(res.status, `events: HTTP ${res.status}`);
      const reader = res.body
        .pipeThrough(new TextDecoderStream())
        .pipeThrough(new EventSourceParserStream())
        .getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        if (value.event !== 'status' && value.event !== 'progress') continue;
        const job = JSON.parse(value.data) as Job;
        onJob(job, value.event);
        if (isTerminalStatus(job.status)) return;
      }
    } catch (err) {
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the stream was awaited: the caller may have aborted meanwhile
      if (signal.aborted) return;
      if (err instanceof ApiError && err.status >= 400 && err.status < 500 && err.status !== 429) return;
    }
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 10_000);
  }
}

export const when = (iso: string | null) => (iso ? new Date(iso).toLocaleString() : '—');
