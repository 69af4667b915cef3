import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import type { AttemptResult } from '../../src/webhooks/attempt.js';
import { WebhookSender, type Deliverable } from '../../src/webhooks/send.js';
import { waitFor } from '../helpers/service.js';
import { startReceiver, type Receiver } from './receiver.js';

/**
 * The sender alone: one timer bounds every attempt in flight (each by its own deadline), results
 * come through a callback, never from inside start().
 */
const TIMEOUT_MS = 300;

let rx: Receiver | undefined;
let sender: WebhookSender | undefined;
afterEach(async () => {
  rx?.release();
  await sender?.close();
  await rx?.close();
  rx = sender = undefined;
});

function event(url: string, id: string): Deliverable {
  return { event_id: id, url, secret: 'whsec_c2VjcmV0', body: `{"event_id":"${id}"}` };
}

describe('WebhookSender', () => {
  it('times out each hanging attempt at its own deadline while others are answered', async () => {
    rx = await startReceiver((req) => (req.path === '/hang' ? 'hang' : 200));
    sender = new WebhookSender({ allowPrivate: true, timeoutMs: TIMEOUT_MS, clock: systemClock });
    const first = sender.send(event(rx.url('/hang'), 'a'));
    await rx.waitForCount(1);
    const answered = await sender.send(event(rx.url('/ok'), 'b'));
    const second = sender.send(event(rx.url('/hang'), 'c'));
    const [r1, r2] = await Promise.all([first, second]);
    expect(answered).toMatchObject({ ok: true, httpStatus: 200, error: null });
    for (const r of [r1, r2]) {
      expect(r).toMatchObject({ ok: false, httpStatus: null, error: 'timed out after 300ms' });
      // Never before its own deadline, however many attempts share the timer.
      expect(r.durationMs).toBeGreaterThanOrEqual(TIMEOUT_MS);
    }
    expect(rx.requests.map((r) => r.path)).toEqual(['/hang', '/ok', '/hang']);
  });

  it('reports an attempt that fails at once after start() returns, as a failed attempt', async () => {
    sender = new WebhookSender({ allowPrivate: true, timeoutMs: TIMEOUT_MS, clock: systemClock });
    const results: AttemptResult[] = [];
    sender.start(event('not a url', 'd'), (r) => {
      if (r) results.push(r);
    });
    expect(results).toEqual([]);
    await waitFor(async () => results.length === 1, 'the failed attempt', 5_000);
    expect(results[0]).toMatchObject({ ok: false, httpStatus: null });
  });

  it('aborts an attempt in flight without a result', async () => {
    rx = await startReceiver(() => 'hang');
    sender = new WebhookSender({ allowPrivate: true, timeoutMs: 30_000, clock: systemClock });
    const ends: Array<[AttemptResult | undefined, Error | undefined]> = [];
    const attempt = sender.start(event(rx.url(), 'e'), (r, aborted) => ends.push([r, aborted]));
    await rx.waitForCount(1);
    const reason = new Error('stopping');
    attempt.abort(reason);
    attempt.abort(new Error('twice'));
    expect(ends).toEqual([[undefined, reason]]);
  });
});
