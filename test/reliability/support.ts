/**
 * Shared pieces of the reliability suite: a raw HTTP/1.1 client (exact bytes on the wire, so
 * headers may carry non-ASCII bytes and paths stay un-normalised), the envelope check, hostile
 * and healthy webhook receivers, a slow media server, a seeded PRNG and the figures file.
 */
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { inject } from 'vitest';
import sharp from 'sharp';
import { fakeLookup, startServer, type TestServer } from '../helpers/servers.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Where each test file drops its figures; global-setup.ts turns them into results.md. */
    reliabilityResultsDir: string;
  }
}

// ---------------------------------------------------------------------------------------------
// Figures

/** Records one section of figures for results.md (written by global-setup.ts after the run). */
export function recordFigures(name: string, figures: Record<string, unknown>): void {
  let dir: string | undefined;
  try {
    dir = inject('reliabilityResultsDir');
  } catch {
    dir = undefined;
  }
  dir ??= process.env.RELIABILITY_RESULTS_DIR;
  const line = `[reliability] ${name}: ${JSON.stringify(figures)}`;
  console.log(line);
  if (!dir) return;
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(
    path.join(dir, `${name.replace(/[^a-z0-9-]+/gi, '_')}.json`),
    JSON.stringify({ name, figures, at: new Date().toISOString() }, null, 2),
  );
}

// ---------------------------------------------------------------------------------------------
// Seeded randomness

/** The seed of every random choice in the suite (fast-check and the scenario timings). */
export const SEED = Number(process.env.RELIABILITY_SEED ?? 20_260_707);
/**
 * Cases per fuzz property: the given counts scaled by RELIABILITY_FUZZ_SCALE (0.2 for a quick look,
 * 3 for a long soak; default 1).
 */
export function caseCounts<K extends string>(counts: Record<K, number>): Record<K, number> {
  const scale = Number(process.env.RELIABILITY_FUZZ_SCALE ?? 1);
  const out = {} as Record<K, number>;
  for (const k of Object.keys(counts) as K[]) out[k] = Math.round(counts[k] * scale);
  return out;
}
/** A fuzz property's fast-check settings: the seed, `numRuns` cases, stop at the first failure or the time limit. */
export const fcParams = (numRuns: number, timeLimitMs = 150_000) => ({
  seed: SEED,
  numRuns,
  endOnFailure: true,
  interruptAfterTimeLimit: timeLimitMs,
});
/** The sum of a fuzz report's `…: cases` figures. */
export const totalCases = (figures: Record<string, unknown>) =>
  Object.entries(figures)
    .filter(([k]) => k.endsWith(': cases'))
    .reduce((n, [, x]) => n + Number(x), 0);

/** mulberry32: a tiny deterministic PRNG for scenario timings. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// URLs

/**
 * Media and webhook URLs that are valid with the production address rule and the fake DNS below
 * (the fuzzers' services resolve names through DNS; test/helpers/servers.ts fakeLookup).
 */
export const VALID_URLS = [
  'http://media.example.com/photo.jpg',
  'https://media.example.com/a/b.png?x=1&y=%20z',
  'http://media.example.com:8080/p.jpg',
  'HTTP://MEDIA.EXAMPLE.COM/UPPER.JPG',
  'http://93.184.216.34/x.jpg',
  'https://[2606:2800:220:1:248:1893:25c8:1946]/a.jpg',
  'http://cdn.example.org/ü/ñ.jpg',
  'http://bücher.example.net/a.jpg',
  'https://media.example.com/' + 'p'.repeat(3000) + '.jpg',
];
export const INVALID_URLS = [
  'http://127.0.0.1/a.jpg',
  'http://localhost/a.jpg',
  'http://10.0.0.1/x',
  'http://169.254.169.254/latest/meta-data/',
  'http://[::1]/',
  'http://[::ffff:127.0.0.1]/',
  'http://[::ffff:7f00:1]/',
  'http://[64:ff9b::a00:1]/',
  'http://2130706433/',
  'http://0x7f.1/',
  'http://0177.0.0.1/',
  'http://100.64.0.1/',
  'http://0.0.0.0/',
  'http://192.0.2.10/doc.jpg',
  'http://metadata/computeMetadata/v1/',
  'http://printer.local/a.jpg',
  'http://private.example.com/a.jpg',
  'http://mixed.example.com/a.jpg',
  'http://nx.example.com/a.jpg',
  'ftp://media.example.com/a.jpg',
  'file:///etc/passwd',
  'javascript:alert(1)',
  'data:image/png;base64,AAAA',
  'gopher://media.example.com/',
  'http://user:pw@media.example.com/a.jpg',
  'http://user@media.example.com/a.jpg',
  'media.example.com/a.jpg',
  '//media.example.com/a.jpg',
  ' http://media.example.com/a.jpg',
  'http://media.example.com/a.jpg ',
  'http://media.example.com/a\n.jpg',
  'http://media.example.com/a\t.jpg',
  '',
  'http://',
  'https://[fe80::1%25eth0]/',
  'http://media.example.com/' + 'a'.repeat(8200),
  'http://[2001:db8::1]/',
];
export const DNS = fakeLookup({
  'media.example.com': ['93.184.216.34'],
  'cdn.example.org': ['93.184.216.35', '2606:2800:220:1:248:1893:25c8:1946'],
  'xn--bcher-kva.example.net': ['93.184.216.36'],
  'private.example.com': ['10.1.2.3'],
  'mixed.example.com': ['93.184.216.34', '127.0.0.1'],
});
export const validUrl = (s: unknown) => typeof s === 'string' && VALID_URLS.includes(s);

// ---------------------------------------------------------------------------------------------
// The fuzzers' models: written from the README and docs/webhooks.md, not imported from the code

export type Obj = Record<string, unknown>;
export const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
export const has = (o: Obj, k: string) => Object.prototype.hasOwnProperty.call(o, k);
/** The webhook event types. */
export const EVENTS: readonly string[] = ['job.completed', 'job.failed', 'job.cancelled'];
/** A webhook's or endpoint's `events`: a non-empty list of event types, none twice. */
export const validEvents = (e: unknown) =>
  Array.isArray(e) && e.length > 0 && e.every((x) => EVENTS.includes(x as string)) && new Set(e).size === e.length;

// ---------------------------------------------------------------------------------------------
// Raw HTTP/1.1

export interface RawResponse {
  status: number;
  /** Lower-cased names; repeated headers joined with ", ". Values decoded as latin1. */
  headers: Record<string, string>;
  body: Buffer;
  text: string;
  /** True when the connection ended without a parsable response. */
  noResponse?: boolean;
}

export interface RawRequestSpec {
  method: string;
  /** The request target, sent verbatim (may contain anything). */
  target: string | Buffer;
  /** Sent in order, verbatim; values may be Buffers (raw bytes). Host and Connection are added unless given. */
  headers?: Array<[string, string | Buffer]>;
  body?: string | Buffer;
  /** Adds Content-Length for the body (default true). */
  contentLength?: boolean;
  /** Overrides the HTTP version on the request line. */
  version?: string;
  /** Skip the automatic Host header. */
  noHost?: boolean;
}

export function buildRequest(spec: RawRequestSpec, hostHeader: string): Buffer {
  const parts: Buffer[] = [];
  const target = typeof spec.target === 'string' ? Buffer.from(spec.target, 'latin1') : spec.target;
  parts.push(
    Buffer.from(`${spec.method} `, 'latin1'),
    target,
    Buffer.from(` ${spec.version ?? 'HTTP/1.1'}\r\n`, 'latin1'),
  );
  const given = new Set((spec.headers ?? []).map(([k]) => k.toLowerCase()));
  if (!spec.noHost && !given.has('host')) parts.push(Buffer.from(`Host: ${hostHeader}\r\n`));
  for (const [k, v] of spec.headers ?? []) {
    parts.push(
      Buffer.from(`${k}: `, 'latin1'),
      typeof v === 'string' ? Buffer.from(v, 'latin1') : v,
      Buffer.from('\r\n'),
    );
  }
  const body =
    spec.body === undefined ? undefined : typeof spec.body === 'string' ? Buffer.from(spec.body, 'utf8') : spec.body;
  if (body !== undefined && spec.contentLength !== false && !given.has('content-length'))
    parts.push(Buffer.from(`Content-Length: ${body.length}\r\n`));
  if (!given.has('connection')) parts.push(Buffer.from('Connection: close\r\n'));
  parts.push(Buffer.from('\r\n'));
  if (body) parts.push(body);
  return Buffer.concat(parts);
}

function parseResponse(buf: Buffer): RawResponse | undefined {
  let offset = 0;
  for (;;) {
    const end = buf.indexOf('\r\n\r\n', offset);
    if (end < 0) return undefined;
    const head = buf.subarray(offset, end).toString('latin1').split('\r\n');
    const m = /^HTTP\/\d\.\d (\d{3})/.exec(head[0] ?? '');
    if (!m) return undefined;
    const status = Number(m[1]);
    const headers: Record<string, string> = {};
    for (const line of head.slice(1)) {
      const i = line.indexOf(':');
      if (i < 0) continue;
      const k = line.slice(0, i).trim().toLowerCase();
      const v = line.slice(i + 1).trim();
      headers[k] = headers[k] === undefined ? v : `${headers[k]}, ${v}`;
    }
    let rest = buf.subarray(end + 4);
    if (status === 100) {
      offset = end + 4;
      continue;
    }
    if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
      const out: Buffer[] = [];
      let p = 0;
      for (;;) {
        const nl = rest.indexOf('\r\n', p);
        if (nl < 0) break;
        const size = parseInt(rest.subarray(p, nl).toString('latin1'), 16);
        if (!Number.isFinite(size) || size === 0) break;
        out.push(rest.subarray(nl + 2, nl + 2 + size));
        p = nl + 2 + size + 2;
      }
      rest = Buffer.concat(out);
    } else if (headers['content-length'] !== undefined) {
      rest = rest.subarray(0, Number(headers['content-length']));
    }
    return { status, headers, body: rest, text: rest.toString('utf8') };
  }
}

/** One request on a fresh connection (Connection: close); resolves with what came back. */
export function rawRequest(port: number, spec: RawRequestSpec | Buffer, timeoutMs = 30_000): Promise<RawResponse> {
  const bytes = Buffer.isBuffer(spec) ? spec : buildRequest(spec, `127.0.0.1:${port}`);
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let settled = false;
    const finish = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      const all = Buffer.concat(chunks);
      resolve(
        parseResponse(all) ?? { status: 0, headers: {}, body: all, text: all.toString('latin1'), noResponse: true },
      );
    };
    const timer = setTimeout(() => {
      if (settled) return;
      settled = true;
      socket.destroy();
      reject(new Error(`no complete answer within ${timeoutMs} ms to ${bytes.subarray(0, 120).toString('latin1')}`));
    }, timeoutMs);
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('end', finish);
    socket.on('close', finish);
    // A reset after a complete answer (the server destroys the socket on parse errors) is fine.
    socket.on('error', () => finish());
    socket.write(bytes, () => socket.end());
  });
}

// ---------------------------------------------------------------------------------------------
// The envelope

const UUID_ANY = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (s: unknown): s is string => typeof s === 'string' && UUID_ANY.test(s);

/**
 * What is wrong with a response under /api/v1, or undefined: a JSON envelope
 * `{code, message, data}` with `code` 0 / `message` "ok" on 2xx and `code` -1, a non-empty
 * message and `data` {} on errors; only 2xx and 4xx statuses; an X-Request-Id.
 */
export function envelopeProblem(
  res: { status: number; headers: Record<string, string>; text: string },
  opts: { head?: boolean } = {},
): string | undefined {
  const { status } = res;
  if (status === 0) return 'no HTTP response';
  if (status >= 500) return `HTTP ${status} (5xx)`;
  if (!((status >= 200 && status < 300) || (status >= 400 && status < 500)))
    return `HTTP ${status} (neither 2xx nor 4xx)`;
  if (!res.headers['x-request-id']) return `HTTP ${status} without X-Request-Id`;
  if (!/^application\/json/.test(res.headers['content-type'] ?? ''))
    return `HTTP ${status} with Content-Type ${JSON.stringify(res.headers['content-type'] ?? null)}`;
  if (opts.head) return undefined;
  let body: unknown;
  try {
    body = JSON.parse(res.text);
  } catch {
    return `HTTP ${status} body is not JSON`;
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return `HTTP ${status} body is not an object`;
  const b = body as Record<string, unknown>;
  const keys = Object.keys(b).sort().join(',');
  if (keys !== 'code,data,message') return `HTTP ${status} body keys are {${keys}}, not {code,message,data}`;
  if (typeof b.data !== 'object' || b.data === null || Array.isArray(b.data))
    return `HTTP ${status} data is not an object`;
  if (status < 300) {
    if (b.code !== 0 || b.message !== 'ok') return `HTTP ${status} success without code 0 / message ok`;
  } else {
    if (b.code !== -1) return `HTTP ${status} error with code ${JSON.stringify(b.code)}`;
    if (typeof b.message !== 'string' || b.message.length === 0) return `HTTP ${status} error without a message`;
    if (Object.keys(b.data).length !== 0) return `HTTP ${status} error with non-empty data`;
  }
  return undefined;
}

/** fetch() Response → the shape envelopeProblem takes. */
export async function fromFetch(
  res: Response,
): Promise<{ status: number; headers: Record<string, string>; text: string }> {
  const headers: Record<string, string> = {};
  res.headers.forEach((v, k) => (headers[k] = v));
  return { status: res.status, headers, text: await res.text() };
}

// ---------------------------------------------------------------------------------------------
// Violations collected by the fuzzers (every class reported at once, smallest example kept)

export class Violations {
  private readonly classes = new Map<string, { count: number; example: string; size: number }>();
  add(kind: string, example: string): void {
    const c = this.classes.get(kind);
    const size = example.length;
    if (!c) this.classes.set(kind, { count: 1, example, size });
    else {
      c.count++;
      if (size < c.size) Object.assign(c, { example, size });
    }
  }
  get size(): number {
    return this.classes.size;
  }
  total(): number {
    return [...this.classes.values()].reduce((n, c) => n + c.count, 0);
  }
  summary(): string[] {
    return [...this.classes].map(([k, c]) => `${k} ×${c.count}; smallest: ${c.example.slice(0, 600)}`);
  }
}

/** A printable, bounded rendering of a request for reports. */
export function describeRequest(method: string, target: string | Buffer, extra = ''): string {
  const t = typeof target === 'string' ? target : target.toString('latin1');
  const shown = t.length > 160 ? `${t.slice(0, 120)}…(${t.length} chars)` : t;
  return `${method} ${JSON.stringify(shown)}${extra ? ` ${extra}` : ''}`;
}

/** Masks ids and numbers so similar failures fall into one class. */
export function normalise(s: string): string {
  return s
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, '<uuid>')
    .replace(/'[^']{20,}'/g, "'<long>'")
    .replace(/\d+/g, 'N')
    .slice(0, 160);
}

// ---------------------------------------------------------------------------------------------
// Webhook receivers

export interface Delivery {
  eventId: string;
  eventType: string;
  jobUuid: string;
  jobStatus: string;
  occurredAt: number;
  path: string;
  /** Date.now() when the whole body had arrived. */
  at: number;
}

export type Behaviour =
  | 'ok'
  | 'hang'
  | 'reset'
  | 'garbage'
  | number
  | { delayMs: number; status: number }
  | { status: number; headers: Record<string, string> };

export interface HookReceiver {
  origin: string;
  url(p?: string): string;
  deliveries: Delivery[];
  /** Requests received (including ones answered with errors, hung or reset). */
  requests(): number;
  /** Requests held open right now (hang, or a delay not yet elapsed). */
  inFlight(): number;
  close(): Promise<void>;
}

/** A real HTTP receiver on 127.0.0.1 behaving as told; it records every webhook it parsed. */
export async function startHookReceiver(
  behaviour: Behaviour | ((n: number) => Behaviour) = 'ok',
): Promise<HookReceiver> {
  const deliveries: Delivery[] = [];
  const sockets = new Set<Socket>();
  let requests = 0;
  let inFlight = 0;
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      requests++;
      const at = Date.now();
      try {
        const p = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        deliveries.push({
          eventId: String(req.headers['x-service-event-id']),
          eventType: p.event_type,
          jobUuid: p.job?.uuid,
          jobStatus: p.job?.status,
          occurredAt: Date.parse(p.occurred_at),
          path: req.url ?? '',
          at,
        });
      } catch {
        /* not a webhook */
      }
      const b = typeof behaviour === 'function' ? behaviour(requests) : behaviour;
      if (b === 'ok') return void res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      if (typeof b === 'number') return void res.writeHead(b, { 'content-type': 'text/plain' }).end(`answer ${b}`);
      if (b === 'reset') return void req.socket.destroy();
      if (b === 'garbage') {
        req.socket.end('HELLO THIS IS NOT HTTP\r\n\r\n');
        return;
      }
      if (b === 'hang') {
        inFlight++;
        res.on('close', () => inFlight--);
        return;
      }
      if ('delayMs' in b) {
        inFlight++;
        const t = setTimeout(() => {
          if (!res.destroyed) res.writeHead(b.status).end('late');
        }, b.delayMs);
        res.on('close', () => {
          inFlight--;
          clearTimeout(t);
        });
        return;
      }
      res.writeHead(b.status, b.headers).end();
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  return {
    origin,
    url: (p = '/hook') => `${origin}${p}`,
    deliveries,
    requests: () => requests,
    inFlight: () => inFlight,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Accepts TCP connections and never reads or answers: a receiver stuck before HTTP. */
export async function startStallReceiver(): Promise<{
  origin: string;
  url(p?: string): string;
  open(): number;
  accepted(): number;
  close(): Promise<void>;
}> {
  const sockets = new Set<net.Socket>();
  let accepted = 0;
  const server = net.createServer((s) => {
    accepted++;
    sockets.add(s);
    s.pause();
    s.on('error', () => undefined);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  return {
    origin,
    url: (p = '/hook') => `${origin}${p}`,
    open: () => sockets.size,
    accepted: () => accepted,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

// ---------------------------------------------------------------------------------------------
// Media

export interface SlowMedia extends TestServer {
  /** A JPEG served after `ms` milliseconds. */
  slow(ms: number, name: string): string;
  missing(name: string): string;
}

/** Real JPEGs on 127.0.0.1 that take a while to arrive (the job is "processing" meanwhile). */
export async function startSlowMedia(): Promise<SlowMedia> {
  const photo = await sharp({ create: { width: 320, height: 240, channels: 3, background: '#3a7' } })
    .jpeg()
    .toBuffer();
  const server = await startServer((req, res) => {
    const m = /^\/slow\/(\d+)\//.exec(req.url ?? '');
    if (!m) return void res.writeHead(404).end('not found');
    const t = setTimeout(() => {
      if (!res.destroyed)
        res.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': photo.length }).end(photo);
    }, Number(m[1]));
    res.on('close', () => clearTimeout(t));
  });
  return {
    ...server,
    slow: (ms, name) => `${server.origin}/slow/${ms}/${name}.jpg`,
    missing: (name) => `${server.origin}/missing/${name}.jpg`,
  };
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL

// One reachability check and admin URL for every suite (test/helpers/db.ts).
export { ADMIN_URL as PG_ADMIN_URL, postgresReachable } from '../helpers/db.js';

/** Percentile of a list of numbers (nearest rank). */
export function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}
