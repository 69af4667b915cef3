/**
 * CPU of WebhookSender alone (no database, no dispatcher) against raw undici, alternated in one
 * process: what the dispatcher's HTTP path costs beyond raw undici's, apart from its claims and
 * recordings (bench/dispatch-profile.ts measures everything together).
 *
 *   N=5000 ROUNDS=5 [IN_FLIGHT=4] node --import tsx bench/dispatch-sender.ts
 *
 * Each round: N deliveries by the sender (IN_FLIGHT at a time, each started when one finishes, as
 * the dispatcher does), then the same by raw undici (a Pool, as bench/scenarios/webhooks.ts); the
 * receiver (bench/helper-server.ts) runs in a child process. Prints CPU µs per delivery, medians last.
 */
import { randomUUID } from 'node:crypto';
import { Pool } from 'undici';
import { systemClock } from '../src/clock.js';
import { WebhookSender } from '../src/webhooks/send.js';
import { freePort, httpClient, inParallel, rawDelivery, spawnChild } from './lib.js';

const N = Number(process.env.N ?? 5000);
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const IN_FLIGHT = Number(process.env.IN_FLIGHT ?? 4);
const SECRET = 'whsec_bench_secret';

const port = await freePort();
const origin = `http://127.0.0.1:${port}`;
const receiver = await spawnChild('receiver', 'helper-server.ts', [], { PORT: String(port) });
const rc = httpClient(origin, '', 1);
const events = Array.from({ length: N }, () => {
  const id = randomUUID();
  const body = JSON.stringify({ event_id: id, event_type: 'job.cancelled', job: { uuid: randomUUID() } });
  return { event_id: id, url: `${origin}/hook`, secret: SECRET, body };
});
const sender = new WebhookSender({ allowPrivate: true, timeoutMs: 10_000, clock: systemClock });

async function senderBurst(): Promise<number> {
  const cpu0 = process.cpuUsage();
  let next = 0;
  await new Promise<void>((resolve) => {
    let running = 0;
    const startOne = (): void => {
      const e = events[next++]!;
      running++;
      sender.start(e, () => {
        running--;
        if (next < N) startOne();
        else if (running === 0) resolve();
      });
    };
    while (running < IN_FLIGHT && next < N) startOne();
  });
  const cpu = process.cpuUsage(cpu0);
  return (cpu.user + cpu.system) / N;
}

async function rawBurst(): Promise<number> {
  const pool = new Pool(origin, { connections: IN_FLIGHT });
  const cpu0 = process.cpuUsage();
  await inParallel(N, IN_FLIGHT, async (i) => {
    const e = events[i]!;
    await rawDelivery(pool, SECRET, e.event_id, e.body);
  });
  const cpu = process.cpuUsage(cpu0);
  await pool.close();
  return (cpu.user + cpu.system) / N;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
try {
  await rc.call('POST', '/reset?mode=ok');
  await senderBurst(); // warm-up
  await rawBurst();
  const s: number[] = [];
  const r: number[] = [];
  for (let i = 1; i <= ROUNDS; i++) {
    s.push(await senderBurst());
    r.push(await rawBurst());
    console.log(`round ${i}: sender ${s.at(-1)!.toFixed(1)} µs CPU/delivery, raw undici ${r.at(-1)!.toFixed(1)} µs`);
  }
  console.log(`median: sender ${median(s).toFixed(1)} µs, raw undici ${median(r).toFixed(1)} µs`);
} finally {
  await sender.close();
  await rc.close();
  await receiver.stop();
}
