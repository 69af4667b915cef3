import pino from 'pino';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { Signals } from '../../src/signals.js';
import type { WebhookSender } from '../../src/webhooks/send.js';
import type { AttemptDone } from '../../src/webhooks/attempt.js';
import * as webhookStore from '../../src/store/webhooks.js';
import { dropTestDatabases, testStore } from '../helpers/db.js';
import { waitFor } from '../helpers/service.js';
import { webhookEventRow } from '../helpers/webhook-events.js';

// The dispatcher's claims, counted (how many events each asks of a destination, and whether a look was
// under way meanwhile); its looks' queries (the most overdue events', or a page of destinations while
// a backlog fills that range), slowed down at will: a look on a busy outbox can be slow.
const looks = { pending: 0, delayMs: 0 };
const claimedDuringLook: number[] = [];
/** A look's query, counted while under way and slowed by looks.delayMs. */
function slowed<A extends unknown[], R>(query: (...a: A) => Promise<R>): (...a: A) => Promise<R> {
  return async (...a: A) => {
    looks.pending++;
    try {
      await new Promise((r) => setTimeout(r, looks.delayMs));
      return await query(...a);
    } finally {
      looks.pending--;
    }
  };
}
vi.mock('../../src/store/webhooks.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../../src/store/webhooks.js')>();
  return {
    ...original,
    claimDueEvents: vi.fn((...a: Parameters<typeof original.claimDueEvents>) => {
      if (looks.pending > 0) claimedDuringLook.push(a[2].destinations.length);
      return original.claimDueEvents(...a);
    }),
    dueDestinations: vi.fn(slowed(original.dueDestinations)),
    pendingDestinations: vi.fn(slowed(original.pendingDestinations)),
  };
});
const claims = vi.mocked(webhookStore.claimDueEvents);
// The test setup loaded the dispatcher with the store module as it is: load it again, on the counted one.
vi.resetModules();
const { WebhookDispatcher: Dispatcher } = await import('../../src/webhooks/dispatcher.js');

const cleanup: Array<() => unknown> = [];
afterAll(async () => {
  for (const f of cleanup.reverse()) await f();
  await dropTestDatabases();
});

/** A receiver that answers every attempt with 200 in `paceMs` (as the attempt's measured duration), on the next turn. */
function fastSender(paceMs: number): { sender: WebhookSender; sent: string[] } {
  const sent: string[] = [];
  const start = (event: { event_id: string }, done: AttemptDone) => {
    sent.push(event.event_id);
    const startedAt = Date.now();
    setImmediate(() => done({ ok: true, startedAt, durationMs: paceMs, httpStatus: 200, error: null }));
    return { abort: () => undefined };
  };
  return { sender: { start } as unknown as WebhookSender, sent };
}

/** `count` due events of one destination, then a dispatcher sending them to a receiver answering in 0.25 ms. */
async function dispatchTo(count: number): Promise<{ sent: string[] }> {
  const store = await testStore('mj-webhook-ahead-');
  cleanup.push(() => store.close());
  const now = Date.now();
  const events = Array.from({ length: count }, (_, i) =>
    webhookEventRow(`ev-${String(i).padStart(5, '0')}`, 'http://fast.example', now - count + i),
  );
  for (let i = 0; i < events.length; i += 200)
    await store.db
      .insertInto('webhook_events')
      .values(events.slice(i, i + 200))
      .execute();
  claims.mockClear();
  const { sender, sent } = fastSender(0.25);
  const dispatcher = new Dispatcher({
    store,
    clock: { now: () => Date.now() },
    signals: new Signals(),
    log: pino({ level: 'silent' }),
    sender,
    scheduleMs: [0, 60_000],
    timeoutMs: 10_000,
    concurrency: 64,
  });
  dispatcher.start();
  try {
    await waitFor(() => sent.length >= count || undefined, 'every event sent', 60_000);
  } finally {
    await dispatcher.stop(100); // its looks and claims end here
  }
  return { sent };
}

describe("the webhook dispatcher's claims", () => {
  it('keeps a fast receiver claimed far enough ahead that a slow claim does not empty its slots', async () => {
    looks.delayMs = 0;
    const { sent } = await dispatchTo(3_000);
    expect(new Set(sent).size).toBe(3_000);
    const asked = claims.mock.calls.flatMap(([, , spec]) => spec.destinations.map((d) => d.limit));
    // Its 4 slots at 0.25 ms an answer get through 2 s of claim-ahead in more than the cap of 512
    // rounds: it is claimed up to the cap, 2,048 events held, in claims of at least half of that.
    expect(Math.max(...asked)).toBeGreaterThan(1_024);
    expect(Math.max(...asked)).toBeLessThanOrEqual(2_048);
  }, 120_000);

  it('claims for a destination known to have due events while a slow look is under way, not after it', async () => {
    // Each look takes 200 ms (a look steps over every leased due event: thousands on a busy outbox).
    looks.delayMs = 200;
    claimedDuringLook.splice(0);
    const { sent } = await dispatchTo(6_000);
    expect(new Set(sent).size).toBe(6_000);
    // While busy the dispatcher looks every 250 ms, and the receiver's answers free room all the
    // while: at least one of those looks had a claim beside it.
    expect(claimedDuringLook.length).toBeGreaterThan(0);
  }, 120_000);
});
