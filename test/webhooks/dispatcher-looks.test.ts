import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import pino from 'pino';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { Signals } from '../../src/signals.js';
import type { Store } from '../../src/store/store.js';
import type { WebhookDispatcher } from '../../src/webhooks/dispatcher.js';
import { WebhookSender } from '../../src/webhooks/send.js';
import * as webhookStore from '../../src/store/webhooks.js';
import { dropTestDatabases, testStore } from '../helpers/db.js';
import { waitFor } from '../helpers/service.js';
import { webhookEventRow } from '../helpers/webhook-events.js';

// The dispatcher's pages of destinations (pendingDestinations), counted.
vi.mock('../../src/store/webhooks.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../../src/store/webhooks.js')>();
  return { ...original, pendingDestinations: vi.fn(original.pendingDestinations) };
});
const pages = vi.mocked(webhookStore.pendingDestinations);
// The test setup loaded the dispatcher with the store module as it is: load it again, on the counted one.
vi.resetModules();
const { WebhookDispatcher: Dispatcher } = await import('../../src/webhooks/dispatcher.js');

const cleanup: Array<() => unknown> = [];
afterAll(async () => {
  for (const f of cleanup.reverse()) await f();
  await dropTestDatabases();
});

/** A receiver that answers with `answer`, or never (its requests are kept until the test ends). */
async function receiver(answer: 'ok' | 'never'): Promise<{ origin: string; ids: string[] }> {
  const ids: string[] = [];
  const hung: ServerResponse[] = [];
  const server: Server = createServer((req: IncomingMessage, res) => {
    ids.push(String(req.headers['x-service-event-id']));
    req.resume();
    if (answer === 'never') hung.push(res);
    else req.on('end', () => res.end('ok'));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanup.push(
    () =>
      new Promise((r) => {
        for (const res of hung) res.destroy();
        server.close(r);
      }),
  );
  return { origin: `http://127.0.0.1:${(server.address() as { port: number }).port}`, ids };
}

async function freshStore(): Promise<Store> {
  const store = await testStore('mj-webhook-looks-');
  cleanup.push(() => store.close());
  return store;
}

function startDispatcher(store: Store): WebhookDispatcher {
  const sender = new WebhookSender({ allowPrivate: true, timeoutMs: 60_000, clock: { now: () => Date.now() } });
  cleanup.push(() => sender.close());
  const dispatcher = new Dispatcher({
    store,
    clock: { now: () => Date.now() },
    signals: new Signals(),
    log: pino({ level: 'silent' }),
    sender,
    scheduleMs: [0, 60_000],
    timeoutMs: 60_000,
    concurrency: 8,
    perDestination: 4,
  });
  dispatcher.start();
  cleanup.push(() => dispatcher.stop(100));
  return dispatcher;
}

describe("the webhook dispatcher's looks for due destinations", () => {
  it('reads no page of destinations when few events are due, however many receivers are in back-off', async () => {
    const store = await freshStore();
    const rx = await receiver('ok');
    const now = Date.now();
    // 300 receivers in back-off (their retries due in an hour): more than a page of destinations.
    const waiting = Array.from({ length: 300 }, (_, i) =>
      webhookEventRow(`wait-${i}`, `http://backoff-${String(i).padStart(3, '0')}.example`, now + 3_600_000),
    );
    await store.db.insertInto('webhook_events').values(waiting).execute();
    await store.db
      .insertInto('webhook_events')
      .values(webhookEventRow('due-now', rx.origin, now))
      .execute();
    pages.mockClear();

    startDispatcher(store);
    await waitFor(
      () =>
        store.db
          .selectFrom('webhook_events')
          .select('state')
          .where('event_id', '=', 'due-now')
          .where('state', '=', 'delivered')
          .executeTakeFirst(),
      'the due event delivered and recorded',
      30_000,
    );
    expect(rx.ids).toEqual(['due-now']);
    expect(pages).not.toHaveBeenCalled();
  }, 120_000);

  it('still finds a destination whose due events lie behind another one’s backlog', async () => {
    const store = await freshStore();
    const stuck = await receiver('never');
    const rx = await receiver('ok');
    const now = Date.now();
    // 400 due events of a receiver that never answers, all older than the other receiver's one:
    // the most overdue claimable events are all its own, so the look pages through destinations.
    const backlog = Array.from({ length: 400 }, (_, i) =>
      webhookEventRow(`stuck-${i}`, stuck.origin, now - 10_000 + i),
    );
    for (let i = 0; i < backlog.length; i += 100)
      await store.db
        .insertInto('webhook_events')
        .values(backlog.slice(i, i + 100))
        .execute();
    await store.db
      .insertInto('webhook_events')
      .values(webhookEventRow('behind', rx.origin, now))
      .execute();
    pages.mockClear();

    startDispatcher(store);
    await waitFor(() => rx.ids.length > 0 || undefined, 'the event behind the backlog sent', 30_000);
    expect(rx.ids).toEqual(['behind']);
    // Started with the event behind, the stuck receiver's attempts may reach it after that one did.
    await waitFor(() => stuck.ids.length >= 4 || undefined, 'the stuck receiver’s slots taken', 30_000);
    expect(stuck.ids.length).toBe(4); // the stuck receiver's slots, no more
    expect(pages).toHaveBeenCalled();
  }, 120_000);
});
