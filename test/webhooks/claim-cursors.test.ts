import { describe, expect, it } from 'vitest';
import { ClaimCursors, CURSOR_MS } from '../../src/webhooks/claim-cursors.js';
import type { ClaimedEventRow } from '../../src/store/webhooks.js';

const D = 'http://d.example';
const row = (eventId: string, at: number, destination = D): ClaimedEventRow => ({
  event_id: eventId,
  job_uuid: 'j',
  event_type: 'job.completed',
  url: `${destination}/hook`,
  destination,
  secret: null,
  body: '{}',
  attempts: 0,
  endpoint_id: null,
  next_attempt_at: at,
  lease_expires_at: 0,
});

describe("the dispatcher's claim cursors", () => {
  it('start a full claim’s next one after its latest row, in (next_attempt_at, event_id) order', () => {
    const c = new ClaimCursors();
    expect(c.after(D, 0)).toBeUndefined();
    // Rows come back in any order; ties on the time go by event id.
    c.advance([{ destination: D, limit: 3 }], [row('b', 5), row('c', 5), row('a', 5)], 0, c.epoch);
    expect(c.after(D, 1)).toEqual(expect.objectContaining({ at: 5, eventId: 'c' }));
    c.advance([{ destination: D, limit: 2, after: c.after(D, 1) }], [row('e', 9), row('d', 7)], 1, c.epoch);
    expect(c.after(D, 2)).toEqual(expect.objectContaining({ at: 9, eventId: 'e' }));
  });

  it('start from the head after a short claim, a hand-back, or CURSOR_MS', () => {
    const c = new ClaimCursors();
    const full = (now: number) =>
      c.advance([{ destination: D, limit: 1, after: c.after(D, now) }], [row(`e${now}`, now)], now, c.epoch);
    full(0);
    c.advance([{ destination: D, limit: 2, after: c.after(D, 1) }], [row('x', 1)], 1, c.epoch);
    expect(c.after(D, 1)).toBeUndefined();

    full(2);
    c.rewind(D);
    expect(c.after(D, 3)).toBeUndefined();

    // A hand-back while a claim was on its way: that claim sets no cursor.
    const epoch = c.epoch;
    c.rewind('http://other.example');
    c.advance([{ destination: D, limit: 1 }], [row('y', 4)], 4, epoch);
    expect(c.after(D, 4)).toBeUndefined();

    // Followed for CURSOR_MS from the claim that started at the head, however many claims since.
    full(10);
    full(10 + CURSOR_MS - 1);
    expect(c.after(D, 10 + CURSOR_MS - 1)).toBeDefined();
    expect(c.after(D, 10 + CURSOR_MS)).toBeUndefined();
  });
});
