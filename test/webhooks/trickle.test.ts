import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleepJobType } from '../helpers/job-types.js';
import { startService, waitFor, type TestService } from '../helpers/service.js';

/**
 * Receivers that trickle their answer forever, one piece every 100 ms: never idle, so no idle
 * timeout ever fires. WEBHOOK_TIMEOUT must bound the whole exchange: each attempt is cut at the
 * timeout, recorded as timed out (not delivered), and retried per the schedule.
 */
const TIMEOUT_MS = 1_500;
const SCHEDULE = '0,300ms,300ms';

interface Trickler {
  url: string;
  /** Requests received, and sockets open right now. */
  requests(): number;
  open(): number;
  close(): Promise<void>;
}

/** 'headers': a status line, then one header byte at a time; 'body': whole headers, then a chunk at a time. */
async function startTrickler(mode: 'headers' | 'body'): Promise<Trickler> {
  const sockets = new Set<net.Socket>();
  let requests = 0;
  const server = net.createServer((socket) => {
    sockets.add(socket);
    let timer: NodeJS.Timeout | undefined;
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(timer);
      sockets.delete(socket);
    });
    socket.once('data', () => {
      requests++;
      socket.write(
        mode === 'headers'
          ? 'HTTP/1.1 200 OK\r\nX-Slow: '
          : 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n',
      );
      timer = setInterval(() => {
        if (!socket.destroyed) socket.write(mode === 'headers' ? 'a' : '1\r\na\r\n');
      }, 100);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    requests: () => requests,
    open: () => sockets.size,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

let svc: TestService;
const receivers: Trickler[] = [];
beforeAll(async () => {
  svc = await startService(
    { WEBHOOK_TIMEOUT: `${TIMEOUT_MS}ms`, WEBHOOK_RETRY_SCHEDULE: SCHEDULE },
    { jobTypes: [sleepJobType()] },
  );
});
afterAll(async () => {
  await svc?.stop();
  for (const r of receivers) await r.close();
});

describe('a webhook receiver that trickles its answer forever', () => {
  it.each(['headers', 'body'] as const)(
    'trickling %s: every attempt is cut at WEBHOOK_TIMEOUT, recorded as timed out, and retried per the schedule',
    async (mode) => {
      const rx = await startTrickler(mode);
      receivers.push(rx);
      const sub = await svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
        body: { job_type: 'test-sleep', model: 'v1', input: { ms: 0 }, webhook: { url: rx.url } },
      });
      expect(sub.status, sub.text).toBe(200);
      const uuid = sub.body.data.uuid as string;

      const delivery = await waitFor(async () => {
        const d = (await svc.call('GET', `/api/v1/jobs/${uuid}/webhook-deliveries`)).body.data?.deliveries?.[0];
        return d?.state === 'failed' ? d : undefined;
      }, `the delivery of ${uuid} to give up`);

      expect(delivery.attempts).toHaveLength(3);
      expect(rx.requests()).toBe(3);
      for (const a of delivery.attempts) {
        expect(a).toMatchObject({ ok: false, http_status: null, error: 'timed out after 1500ms' });
        // Cut at the bound: not before it, and long before the trickle would ever end.
        expect(a.duration_ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 25);
        expect(a.duration_ms).toBeLessThan(TIMEOUT_MS + 5_000);
      }
      // Retried per the schedule: each retry 300 ms or more after the previous attempt ended.
      for (let i = 1; i < 3; i++) {
        const prev = delivery.attempts[i - 1];
        const prevEnd = Date.parse(prev.started_at) + Number(prev.duration_ms);
        expect(Date.parse(delivery.attempts[i].started_at)).toBeGreaterThanOrEqual(prevEnd + 300 - 25);
      }
      // The service hung up on every trickling connection.
      await waitFor(() => rx.open() === 0, 'the trickling connections to be closed', 10_000);
    },
  );
});
