import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createServer, type AddressInfo } from 'node:net';
import { createApp, type App, type AppOptions } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createKey } from '../../src/store/keys.js';

export function tempDir(prefix = 'mj-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

export interface Reply<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface CallOptions {
  key?: string | null;
  body?: unknown;
  /** Sent verbatim (with the given or a JSON content type). */
  raw?: string;
  headers?: Record<string, string>;
}

/** A tiny HTTP client over real loopback HTTP. */
export function client(base: string, defaultKey?: string) {
  return async function call<T = any>(method: string, url: string, opts: CallOptions = {}): Promise<Reply<T>> {
    const headers: Record<string, string> = { ...opts.headers };
    const key = opts.key === undefined ? defaultKey : opts.key;
    if (key) headers.authorization ??= `Bearer ${key}`;
    let body: string | undefined;
    if (opts.raw !== undefined) body = opts.raw;
    else if (opts.body !== undefined) body = JSON.stringify(opts.body);
    if (body !== undefined) headers['content-type'] ??= 'application/json';
    const res = await fetch(new URL(url, base), { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: res.status, headers: res.headers, body: parsed as T, text };
  };
}

export type Call = ReturnType<typeof client>;

export interface TestService {
  app: App;
  base: string;
  dataDir: string;
  key: string;
  owner: string;
  call: Call;
  newKey(owner: string): Promise<string>;
  stop(): Promise<void>;
}

/** Starts the whole service in this process on a real port, with a fresh SQLite file. */
export async function startService(
  env: Record<string, string> = {},
  opts: AppOptions & { dataDir?: string } = {},
): Promise<TestService> {
  const dataDir = opts.dataDir ?? tempDir();
  const port = await freePort();
  const { storeEnv } = await import('./db.js');
  const config = loadConfig({
    HOST: '127.0.0.1',
    PORT: String(port),
    ...(await storeEnv(dataDir)),
    LOG_LEVEL: 'silent',
    MEDIA_ALLOW_PRIVATE_NETWORKS: 'true',
    JOB_LEASE: '2s',
    QUEUE_POLL_INTERVAL: '100ms',
    WORKER_CONCURRENCY: '2',
    WEBHOOK_RETRY_SCHEDULE: '0,200ms,400ms,600ms,800ms',
    // No face or video models loaded at start by every test service (test/api/warmup.test.ts turns it on).
    WORKER_WARMUP: 'false',
    ...env,
  });
  const app = await createApp(config, opts);
  await app.start();
  const owner = 'alice';
  const key = (await createKey(app.store.db, owner, Date.now())).key;
  const base = `http://127.0.0.1:${port}`;
  return {
    app,
    base,
    dataDir,
    key,
    owner,
    call: client(base, key),
    newKey: async (o) => (await createKey(app.store.db, o, Date.now())).key,
    // Bounded: a rare slow shutdown on a loaded machine must not fail an unrelated test's hook;
    // the shutdown itself is tested by the recovery tests through real SIGTERM.
    stop: () => Promise.race([app.stop(2_000), new Promise<void>((r) => setTimeout(r, 20_000).unref())]),
  };
}

/** Polls until `fn` returns a truthy value; generous deadline, no timing assertions. */
export async function waitFor<T>(
  fn: () => Promise<T | undefined | false> | T | undefined | false,
  what = 'condition',
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Polls a job's status until it is terminal and returns the job object. */
export async function waitTerminal(call: Call, uuid: string, key?: string): Promise<any> {
  return waitFor(async () => {
    const r = await call('GET', `/api/v1/jobs/${uuid}/status`, key ? { key } : {});
    return ['completed', 'failed', 'cancelled'].includes(r.body.data?.status) ? r.body.data : undefined;
  }, `job ${uuid} to finish`);
}
