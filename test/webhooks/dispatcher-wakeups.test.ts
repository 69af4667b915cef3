import { createServer, type Server } from 'node:http';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/clock.js';
import { Signals } from '../../src/signals.js';
import type { Store } from '../../src/store/store.js';
import { WebhookDispatcher } from '../../src/webhooks/dispatcher.js';
import { WebhookSender } from '../../src/webhooks/send.js';
import { dropTestDatabases, testStore } from '../helpers/db.js';
import { waitFor } from '../helpers/service.js';
import { webhookEventRow } from '../helpers/webhook-events.js';

// The dispatcher's own sleeps: none may outlast an event that is due. The poll here is longer
// than the test's patience, so an event left for the poll to find fails the test.
const POLL_MS = 600_000;

const cleanup: Array<() => unknown> = [];
afterAll(async () => {
  for (const f of cleanup.reverse()) await f();
  await dropTestDatabases();
});

async function receiver(): Promise<{ origin: string; ids: string[] }> {
  const ids: string[] = [];
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      ids.push(String(req.headers['x-service-event-id']));
      res.end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanup.push(() => new Promise((r) => server.close(r)));
  return { origin: `http://127.0.0.1:${(server.address() as { port: number }).port}`, ids };
}

async function insertEvent(store: Store, id: string, origin: string, dueAt: number): Promise<void> {
  await store.db
    .insertInto('webhook_events')
    .values(webhookEventRow(id, origin, dueAt))
    .execute();
}

describe('webhook dispatcher wake-ups', () => {
  it('sends an event at its due time even when it falls due right after a look at the table', async () => {
    const store = await testStore('mj-webhook-wakeups-');
    cleanup.push(() => store.close());
    const rx = await receiver();

    // Time stands still until the test moves it: the dispatcher's first look finds the event not
    // yet due, and it sleeps until its due time (real milliseconds, short).
    let t = Date.now();
    const clock: Clock = { now: () => t };
    await insertEvent(store, 'ev-soon', rx.origin, t + 50);
    const sender = new WebhookSender({ allowPrivate: true, timeoutMs: 30_000, clock });
    cleanup.push(() => sender.close());
    const dispatcher = new WebhookDispatcher({
      store,
      clock,
      signals: new Signals(),
      log: pino({ level: 'silent' }),
      sender,
      scheduleMs: [0, 60_000],
      timeoutMs: 30_000,
      concurrency: 4,
      pollMs: POLL_MS,
    });
    dispatcher.start();
    cleanup.push(() => dispatcher.stop(1_000));
    await new Promise((r) => setTimeout(r, 300));
    expect(rx.ids).toEqual([]);

    // Due now, within a look-around interval of the last look, and no wake-up signal: the
    // dispatcher's next pass (at the due time it slept for) must find it, not the poll.
    t += 50;
    await waitFor(() => rx.ids.length > 0, 'the event sent at its due time', 30_000);
    expect(rx.ids).toEqual(['ev-soon']);
    const row = await waitFor(
      () =>
        store.db
          .selectFrom('webhook_events')
          .select(['state', 'attempts'])
          .where('event_id', '=', 'ev-soon')
          .where('state', '=', 'delivered')
          .executeTakeFirst(),
      'the delivery recorded',
      30_000,
    );
    expect(row).toEqual({ state: 'delivered', attempts: 1 });
  }, 120_000);
});
