import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, spawnService, type ChildService } from '../helpers/child.js';
import { storeEnv } from '../helpers/db.js';

// A body over MAX_BODY_BYTES is answered before it is read; the answer must still reach a client
// that is busy sending (the lingering close in src/http/linger.ts), never an EPIPE or a reset.
// The service runs in its own process: in the test's own process the client and the server share
// one event loop and the race that loses the answer does not happen.

let svc: ChildService;
let key: string;
beforeAll(async () => {
  const env = { ...(await storeEnv()), WORKER_CONCURRENCY: '0' }; // MAX_BODY_BYTES: 1 MiB (the default)
  key = cli(['keys', 'create', '--owner', 'big'], env).lastLine;
  svc = await spawnService(env, key);
});
afterAll(async () => {
  if (svc?.proc.exitCode === null) await svc.term();
});

const TWO_MB = Buffer.alloc(2 * 1024 * 1024, 'x');

/**
 * POSTs `body` with node's http client in 64 KiB writes (on a fresh connection, or the global
 * keep-alive agent's): the status and body, or the error.
 */
function post(
  body: Buffer,
  opts: { chunked?: boolean; keepAlive?: boolean } = {},
): Promise<{ status: number; text: string } | { error: string }> {
  const chunked = opts.chunked ?? false;
  return new Promise((resolve) => {
    const url = new URL('/api/v1/jobs/submit/image-transform', svc.base);
    const req = http.request(url, {
      method: 'POST',
      ...(opts.keepAlive ? {} : { agent: false }),
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        ...(chunked ? {} : { 'content-length': String(body.length) }),
      },
    });
    let answered: { status: number; text: string } | undefined;
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => {
        answered = { status: res.statusCode ?? 0, text };
        resolve(answered);
      });
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (!answered) resolve({ error: err.code ?? err.message });
    });
    let offset = 0;
    const writeMore = () => {
      while (offset < body.length) {
        const chunk = body.subarray(offset, offset + 64 * 1024);
        offset += chunk.length;
        if (!req.write(chunk)) {
          req.once('drain', writeMore);
          return;
        }
      }
      req.end();
    };
    writeMore();
  });
}

describe('body too large', () => {
  const expected = {
    status: 413,
    text: JSON.stringify({ code: -1, message: `body is larger than ${1024 * 1024} bytes`, data: {} }),
  };

  it('answers 30 of 30 two-megabyte bodies (Content-Length, fresh connections) with the 413 envelope', async () => {
    const outcomes = [];
    for (let i = 0; i < 30; i++) outcomes.push(await post(TWO_MB));
    expect(outcomes).toEqual(Array.from({ length: 30 }, () => expected));
  });

  it("answers 30 of 30 through node's keep-alive agent too", async () => {
    const outcomes = [];
    for (let i = 0; i < 30; i++) outcomes.push(await post(TWO_MB, { keepAlive: true }));
    expect(outcomes).toEqual(Array.from({ length: 30 }, () => expected));
  });

  it('answers chunked bodies over the limit, several at once, with the 413 envelope', async () => {
    const outcomes = await Promise.all(Array.from({ length: 10 }, () => post(TWO_MB, { chunked: true })));
    for (const o of outcomes) {
      expect(o).toMatchObject({ status: 413 });
      expect(JSON.parse((o as { text: string }).text)).toMatchObject({ code: -1, data: {} });
    }
  });

  it('keeps serving normal requests meanwhile', async () => {
    const [big, small] = await Promise.all([post(TWO_MB), svc.call('GET', '/api/v1/job-types')]);
    expect(big).toMatchObject({ status: 413 });
    expect(small.status).toBe(200);
  });
});
