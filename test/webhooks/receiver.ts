import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { waitFor } from '../helpers/service.js';

/** One request as the receiver saw it: the raw bytes, before any parsing. */
export interface Received {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  raw: Buffer;
  /** Date.now() when the whole body had arrived. */
  at: number;
  json(): any;
}

/**
 * What to answer to the n-th request (1-based): a status, 'hang' (never answer, until
 * release() or close()), or a full answer.
 */
export type Respond = (
  req: Received,
  n: number,
) => number | 'hang' | { status: number; headers?: Record<string, string>; body?: string };

export interface Receiver {
  origin: string;
  port: number;
  url(path?: string): string;
  requests: Received[];
  /** Requests currently held open ('hang') and the most held at once. */
  hanging(): number;
  maxConcurrent(): number;
  respond: Respond;
  /** Answers every held request with `status`. */
  release(status?: number): void;
  waitForCount(n: number, what?: string, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

/** A real webhook receiver on 127.0.0.1 that records every request byte for byte. */
export async function startReceiver(respond: Respond = () => 200): Promise<Receiver> {
  const requests: Received[] = [];
  const held: ServerResponse[] = [];
  const sockets = new Set<Socket>();
  let open = 0;
  let maxOpen = 0;
  const state = { respond };
  const server: Server = createServer((req, res) => {
    open++;
    maxOpen = Math.max(maxOpen, open);
    res.on('close', () => open--);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const r: Received = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        raw,
        at: Date.now(),
        json: () => JSON.parse(raw.toString('utf8')),
      };
      requests.push(r);
      const answer = state.respond(r, requests.length);
      if (answer === 'hang') {
        held.push(res);
        return;
      }
      const a = typeof answer === 'number' ? { status: answer } : answer;
      res.writeHead(a.status, { 'content-type': 'text/plain', ...a.headers });
      res.end(a.body ?? `answer ${a.status}`);
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
    port,
    url: (path = '/hook') => `${origin}${path}`,
    requests,
    hanging: () => held.filter((r) => !r.writableEnded && !r.destroyed).length,
    maxConcurrent: () => maxOpen,
    get respond() {
      return state.respond;
    },
    set respond(f: Respond) {
      state.respond = f;
    },
    release(status = 200) {
      for (const r of held.splice(0)) {
        if (!r.destroyed) {
          r.writeHead(status);
          r.end();
        }
      }
    },
    waitForCount: (n, what = `${n} webhook requests`, timeoutMs = 30_000) =>
      waitFor(() => (requests.length >= n ? requests.slice() : undefined), what, timeoutMs),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
