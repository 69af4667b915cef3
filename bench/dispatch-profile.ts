/**
 * CPU of the webhook dispatcher alone, in this process: N pending events to a local receiver that
 * answers 200, delivered by one WebhookDispatcher on SQLite; prints CPU ms per delivery. Run with
 * `node --cpu-prof --import tsx bench/dispatch-profile.ts` to see where the time goes.
 */
import { createServer } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import pino from 'pino';
import { systemClock } from '../src/clock.js';
import { Signals } from '../src/signals.js';
import { openStore } from '../src/store/db.js';
import { WebhookDispatcher } from '../src/webhooks/dispatcher.js';
import { WebhookSender } from '../src/webhooks/send.js';

const N = Number(process.env.N ?? 3000);
let delivered = 0;
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    delivered++;
    res.end();
  });
});
await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
const origin = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mj-dprof-'));
const store = await openStore(process.env.DB ?? `sqlite:${path.join(dir, 'db.sqlite')}`);
const now = Date.now();
const body = JSON.stringify({ event_id: 'x', event_type: 'job.completed', job: { uuid: 'u', status: 'completed' } });
for (let i = 0; i < N; i += 500)
  await store.db
    .insertInto('webhook_events')
    .values(
      Array.from({ length: Math.min(500, N - i) }, (_, j) => ({
        event_id: `ev-${i + j}`,
        job_uuid: `job-${i + j}`,
        owner: 'o',
        event_type: 'job.completed',
        url: `${origin}/hook`,
        destination: origin,
        secret: 'whsec_bench_secret',
        body,
        state: 'pending' as const,
        next_attempt_at: now,
        lease_owner: null,
        lease_expires_at: null,
        created_at: now,
        updated_at: now,
      })),
    )
    .execute();
const log = pino({ level: 'info' }, fs.createWriteStream('/dev/null'));
const sender = new WebhookSender({ allowPrivate: true, timeoutMs: 10_000, clock: systemClock });
const d = new WebhookDispatcher({
  store,
  clock: systemClock,
  signals: new Signals(),
  log,
  sender,
  scheduleMs: [0, 60_000],
  timeoutMs: 10_000,
  concurrency: 64,
});
const cpu0 = process.cpuUsage();
const t0 = performance.now();
d.start();
while (delivered < N) await new Promise((r) => setTimeout(r, 20));
const wall = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
await d.stop();
console.log(
  `${N} deliveries in ${wall.toFixed(0)} ms: ${((cpu.user + cpu.system) / 1000 / N).toFixed(3)} CPU ms each (receiver in the same process)`,
);
await sender.close();
await store.close();
server.close();
