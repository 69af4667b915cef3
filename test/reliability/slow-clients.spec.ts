/**
 * Slow clients against a real `media-jobs serve` process (a child, so the test's own sockets do not
 * share its event loop):
 * - slowloris: 300 sockets sending their request headers one byte a second. Normal requests, each
 *   on a new connection, keep being answered while they are open, and every slow socket is cut by
 *   HTTP_HEADERS_TIMEOUT (408 envelope, then closed).
 * - slow bodies: complete headers, then the body one byte a second. Cut by HTTP_REQUEST_TIMEOUT
 *   (408 envelope, then closed), the server unaffected; a body that is slow but complete in time
 *   is answered normally.
 * The latencies of the normal requests go to results.md; the assertions are on answers only.
 */
import net from 'node:net';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, spawnService, type ChildService } from '../helpers/child.js';
import { tempDir, waitFor } from '../helpers/service.js';
import { percentile, recordFigures, sleep } from './support.js';

const HEADERS_TIMEOUT_MS = 4_000;
const REQUEST_TIMEOUT_MS = 6_000;
const SLOWLORIS = 300;
const SLOW_BODIES = 20;

let child: ChildService | undefined;
let key = '';
let port = 0;
const figures: Record<string, unknown> = {};

beforeAll(async () => {
  const env = {
    DATA_DIR: tempDir('mj-slow-'),
    WORKER_CONCURRENCY: '0',
    HTTP_HEADERS_TIMEOUT: `${HEADERS_TIMEOUT_MS}ms`,
    HTTP_REQUEST_TIMEOUT: `${REQUEST_TIMEOUT_MS}ms`,
    RATE_LIMIT_SUBMIT: '0',
    RATE_LIMIT_READ: '0',
  };
  key = cli(['keys', 'create', '--owner', 'slow-clients'], env).lastLine;
  child = await spawnService(env, key);
  port = Number(new URL(child.base).port);
});
afterAll(async () => {
  if (Object.keys(figures).length > 0) recordFigures('slow clients', figures);
  await child?.term();
});

interface SlowSocket {
  /** Resolves when the server closed the connection: ms since the first byte, and what it answered. */
  closed: Promise<{ ms: number; answer: string }>;
  /** The status line of the answer, once one has arrived. */
  statusLine(): string | undefined;
  stop(): void;
}

/** Sends `head` at once, then `drip` `chunk` bytes every `everyMs` (one byte a second by default). */
function slowSocket(head: string, drip: string, everyMs = 1_000, chunk = 1): SlowSocket {
  const socket = net.connect(port, '127.0.0.1');
  let received = '';
  let timer: NodeJS.Timeout | undefined;
  const t0 = performance.now();
  const closed = new Promise<{ ms: number; answer: string }>((resolve) => {
    socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(timer);
      resolve({ ms: performance.now() - t0, answer: received.split('\r\n')[0] ?? '' });
    });
  });
  socket.on('connect', () => {
    socket.write(head);
    let i = 0;
    timer = setInterval(() => {
      if (i < drip.length && socket.writable) socket.write(drip.slice(i, (i += chunk)));
    }, everyMs);
  });
  return {
    closed,
    statusLine: () => (received.includes('\r\n') ? received.split('\r\n')[0] : undefined),
    stop: () => socket.destroy(),
  };
}

/** One normal request on a new connection; resolves with its status and latency. */
function normalRequest(path: string): Promise<{ status: number; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.get(
      { host: '127.0.0.1', port, path, agent: false, headers: { authorization: `Bearer ${key}` } },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - t0 }));
      },
    );
    req.on('error', reject);
    req.setTimeout(30_000, () => req.destroy(new Error(`no answer to ${path} within 30 s`)));
  });
}

/** Normal traffic (two clients, one request at a time each) until `until` settles. */
async function normalTraffic(until: Promise<unknown>): Promise<Array<{ status: number; ms: number }>> {
  let done = false;
  void until.finally(() => (done = true));
  const out: Array<{ status: number; ms: number }> = [];
  const paths = ['/api/v1/jobs?limit=5', '/healthz', '/api/v1/job-types'];
  await Promise.all(
    [0, 1].map(async (c) => {
      for (let i = c; !done; i++) {
        out.push(await normalRequest(paths[i % paths.length]!));
        await sleep(20);
      }
    }),
  );
  return out;
}

const summary = (xs: number[]) =>
  `${Math.round(percentile(xs, 50))} / ${Math.round(percentile(xs, 99))} / ${Math.round(Math.max(...xs))}`;

/**
 * Normal traffic while the server cuts the slow sockets; ends when all are closed or `boundMs` + 30 s
 * have passed. The close times and answers, or 'deadline'.
 */
async function whileCut(slow: SlowSocket[], boundMs: number) {
  const allClosed = Promise.all(slow.map((s) => s.closed));
  const deadline = sleep(boundMs + 30_000).then(() => 'deadline' as const);
  const traffic = normalTraffic(Promise.race([allClosed, deadline]));
  const outcome = await Promise.race([allClosed, deadline]);
  const normal = await traffic;
  for (const s of slow) s.stop();
  const closes = outcome === 'deadline' ? [] : outcome;
  const ms = closes.map((c) => c.ms);
  return {
    outcome,
    normal,
    closes,
    answered408: closes.filter((c) => c.answer.startsWith('HTTP/1.1 408')).length,
    /** "min / median / max" of the close times. */
    spread: `${Math.round(Math.min(...ms))} / ${Math.round(percentile(ms, 50))} / ${Math.round(Math.max(...ms))}`,
  };
}

describe('slow clients', () => {
  it(`slowloris: ${SLOWLORIS} sockets sending headers one byte a second are cut; normal requests keep answering`, async () => {
    const slow: SlowSocket[] = [];
    for (let i = 0; i < SLOWLORIS; i++)
      slow.push(slowSocket('GET /api/v1/job-types HTTP/1.1\r\n', `Host: x\r\nX-Pad: ${'a'.repeat(600)}\r\n\r\n`));
    const { outcome, normal, closes, answered408, spread } = await whileCut(slow, HEADERS_TIMEOUT_MS);

    expect(outcome, 'every slow socket closed by the server').not.toBe('deadline');
    Object.assign(figures, {
      'slowloris: sockets sending headers at 1 byte/s': SLOWLORIS,
      'slowloris: HTTP_HEADERS_TIMEOUT, ms': HEADERS_TIMEOUT_MS,
      'slowloris: closed by the server, after ms (min / median / max)': spread,
      'slowloris: answered 408 before the close': answered408,
      'slowloris: normal requests (new connection each) while they were open': normal.length,
      'slowloris: normal requests answered 200': normal.filter((r) => r.status === 200).length,
      'slowloris: normal request latency, ms (p50 / p99 / max)': summary(normal.map((r) => r.ms)),
    });
    expect(normal.length).toBeGreaterThanOrEqual(10);
    expect(normal.filter((r) => r.status !== 200)).toEqual([]);
    // Cut by the headers timeout, not earlier: a slow client is not mistaken for an idle one.
    expect(Math.min(...closes.map((c) => c.ms))).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 100);
    expect(answered408).toBe(SLOWLORIS);
    // And the server is as it was.
    expect((await normalRequest('/api/v1/jobs?limit=5')).status).toBe(200);
  });

  it(`slow bodies: ${SLOW_BODIES} bodies sent one byte a second are cut by HTTP_REQUEST_TIMEOUT; a slow body that ends in time is answered`, async () => {
    const submit = (length: number) =>
      `POST /api/v1/jobs/submit/image-transform HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
    const slow: SlowSocket[] = [];
    for (let i = 0; i < SLOW_BODIES; i++) slow.push(slowSocket(submit(1000), 'x'.repeat(1000)));
    const body = JSON.stringify({
      job_type: 'image-transform',
      model: 'mitchell',
      input: { source: 'http://127.0.0.1:9/photo.jpg', width: 10 },
    });
    // ~100 bytes, 10 every 250 ms: about 2.5 s, within the 6 s bound, though never sent at once.
    const inTime = slowSocket(submit(Buffer.byteLength(body)), body, 250, 10);
    const { outcome, normal, closes, answered408, spread } = await whileCut(slow, REQUEST_TIMEOUT_MS);

    expect(outcome, 'every slow body cut by the server').not.toBe('deadline');
    Object.assign(figures, {
      'slow bodies: sockets sending a body at 1 byte/s': SLOW_BODIES,
      'slow bodies: HTTP_REQUEST_TIMEOUT, ms': REQUEST_TIMEOUT_MS,
      'slow bodies: closed by the server, after ms (min / median / max)': spread,
      'slow bodies: answered 408 before the close': answered408,
      'slow bodies: normal requests while they were open / answered 200': `${normal.length} / ${normal.filter((r) => r.status === 200).length}`,
      'slow bodies: normal request latency, ms (p50 / p99 / max)': summary(normal.map((r) => r.ms)),
    });
    expect(normal.filter((r) => r.status !== 200)).toEqual([]);
    expect(Math.min(...closes.map((c) => c.ms))).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 100);
    expect(answered408).toBe(SLOW_BODIES);
    // The slow body that ended in time was taken as a normal submit (a keep-alive connection:
    // closed here once the answer is in).
    expect(await waitFor(() => inTime.statusLine(), 'the in-time slow body to be answered')).toBe('HTTP/1.1 200 OK');
    inTime.stop();
  });
});
