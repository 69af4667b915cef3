import pino from 'pino';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { Signals } from '../../src/signals.js';
import type { WebhookSender } from '../../src/webhooks/send.js';
import type { AttemptDone } from '../../src/webhooks/attempt.js';
import * as webhookStore from '../../src/store/webhooks.js';
import { dropTestDatabases, testStore } from '../helpers/db.js';
import { waitFor } from '../helpers/service.js';
import { webhookEventRow } from '../helpers/webhook-events.js';

// The dispatcher's claims, counted (how many events each asks of a destination).
vi.mock('../../src/store/webhooks.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../../src/store/webhooks.js')>();
  return { ...original, claimDueEvents: vi.fn(original.claimDueEvents) };
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

describe("the webhook dispatcher's claims ahead", () => {
  it('keeps a fast receiver claimed far enough ahead that a slow claim does not empty its slots', async () => {
    const store = await testStore('mj-webhook-ahead-');
    cleanup.push(() => store.close());
    const destination = 'http://fast.example';
    const now = Date.now();
    const events = Array.from({ length: 3_000 }, (_, i) =>
      webhookEventRow(`ev-${String(i).padStart(4, '0')}`, destination, now - 3_000 + i),
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
    cleanup.push(() => dispatcher.stop(100));
    await waitFor(() => sent.length >= events.length || undefined, 'every event sent', 60_000);

    expect(new Set(sent).size).toBe(events.length);
    const asked = claims.mock.calls.flatMap(([, , spec]) => spec.destinations.map((d) => d.limit));
    // Its 4 slots at 0.25 ms an answer get through 2 s of claim-ahead in more than the cap of 512
    // rounds: it is claimed up to the cap, 2,048 events held, in claims of at least half of that.
    expect(Math.max(...asked)).toBeGreaterThan(1_024);
    expect(Math.max(...asked)).toBeLessThanOrEqual(2_048);
  }, 120_000);
});
