/**
 * What an idle webhook dispatcher costs while many receivers are in back-off: DESTINATIONS
 * destinations, each with one pending event scheduled an hour ahead, nothing due. The dispatcher
 * runs for SECONDS; printed: this process's CPU (the dispatcher's claim loop) and, on PostgreSQL,
 * the server backends' CPU serving the bench database, per second of running.
 *
 *   DB=sqlite|postgres DESTINATIONS=10000 SECONDS=10 [POLL_MS=1000] node --import tsx bench/dispatch-backoff.ts
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import pg from 'pg';
import { systemClock } from '../src/clock.js';
import { Signals } from '../src/signals.js';
import { openStore } from '../src/store/db.js';
import { WebhookDispatcher } from '../src/webhooks/dispatcher.js';
import { WebhookSender } from '../src/webhooks/send.js';
import { createPgDatabase, dropPgDatabase, insertWebhookEvents, serverBackendsCpu } from './lib.js';

const DESTINATIONS = Number(process.env.DESTINATIONS ?? 10_000);
const SECONDS = Number(process.env.SECONDS ?? 10);
const postgres = process.env.DB === 'postgres';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mj-dbackoff-'));
const url = postgres ? await createPgDatabase() : `sqlite:${path.join(dir, 'db.sqlite')}`;
const store = await openStore(url);
const admin = postgres ? new pg.Client({ connectionString: url }) : undefined;
await admin?.connect();
const sender = new WebhookSender({ allowPrivate: true, timeoutMs: 10_000, clock: systemClock });
const dispatcher = new WebhookDispatcher({
  store,
  clock: systemClock,
  signals: new Signals(),
  log: pino({ level: 'silent' }),
  sender,
  scheduleMs: [0, 60_000, 300_000, 1_800_000, 21_600_000],
  timeoutMs: 10_000,
  concurrency: 64,
  pollMs: Number(process.env.POLL_MS ?? 1_000),
});

try {
  const later = Date.now() + 3_600_000;
  const rows = Array.from({ length: DESTINATIONS }, (_, i) => {
    const destination = `http://backoff-${i}.example`;
    return {
      event_id: `e${i}`,
      job_uuid: `j${i}`,
      owner: 'o',
      event_type: 'job.failed',
      url: `${destination}/hook`,
      destination,
      secret: null,
      body: '{}',
      state: 'pending' as const,
      attempts: 2,
      next_attempt_at: later,
      created_at: later,
      updated_at: later,
    };
  });
  await insertWebhookEvents(store.db, rows);
  dispatcher.start();
  await new Promise((r) => setTimeout(r, 2_000)); // its first passes
  const server0 = admin && (await serverBackendsCpu(admin)).us;
  const cpu0 = process.cpuUsage();
  await new Promise((r) => setTimeout(r, SECONDS * 1_000));
  const cpu = process.cpuUsage(cpu0);
  const server1 = admin && (await serverBackendsCpu(admin)).us;
  const perSecond = (us: number) => (us / SECONDS / 1_000).toFixed(1);
  console.log(
    `${process.env.DB ?? 'sqlite'}, ${DESTINATIONS} destinations in back-off, nothing due: dispatcher ` +
      `${perSecond(cpu.user + cpu.system)} ms CPU per second` +
      (server0 !== undefined && server1 !== undefined ? `, server ${perSecond(server1 - server0)} ms per second` : ''),
  );
} finally {
  await dispatcher.stop();
  await sender.close();
  await admin?.end();
  await store.close();
  if (postgres) await dropPgDatabase(url);
  fs.rmSync(dir, { recursive: true, force: true });
}
