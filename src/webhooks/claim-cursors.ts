import type { ClaimCursor, ClaimedEventRow, DestinationClaim } from '../store/webhooks.js';

/**
 * How long a destination's cursor is followed before a claim starts from the head of its range
 * again: events behind the cursor (handed back by another dispatcher's stop, or its leases expired
 * when it died) wait at most this long beyond their lease while a backlog keeps claims full.
 */
export const CURSOR_MS = 5_000;

interface Cursor extends ClaimCursor {
  /** When claims there last started from the head of the range. */
  since: number;
}

/**
 * Per destination, the last event a full claim took (in claim order: next_attempt_at, then
 * event_id): the next claim there starts after it, not at the head of the destination's pending
 * range, where the events this dispatcher holds (queued, in flight, or waiting for their
 * recording) are still leased: about two rows stepped over per claimed event otherwise. Any
 * claimed row is a safe cursor: a claim takes the first claimable rows in that order, so when it is
 * full, every unclaimed claimable row comes after each claimed one; the latest one found is kept.
 * A short claim (nothing more claimable after the cursor), an event handed back (it is behind the
 * cursor) and CURSOR_MS drop the cursor: the next claim starts from the head again.
 */
export class ClaimCursors {
  private readonly cursors = new Map<string, Cursor>();
  /**
   * Counts hand-backs. One made while a claim was on its way may be behind the rows that claim
   * took (leased when it read them): that claim sets no cursor (hand-backs are rare).
   */
  private rewinds = 0;

  /** Passed back to advance with the claim it was taken before. */
  get epoch(): number {
    return this.rewinds;
  }

  /** Where a claim for `destination` starts (undefined: the head of its range). */
  after(destination: string, now: number): ClaimCursor | undefined {
    const c = this.cursors.get(destination);
    if (c && now - c.since >= CURSOR_MS) {
      this.cursors.delete(destination);
      return undefined;
    }
    return c;
  }

  /** After a claim: full claims move their destination's cursor to the latest row they took. */
  advance(claims: readonly DestinationClaim[], rows: readonly ClaimedEventRow[], now: number, epoch: number): void {
    if (epoch !== this.rewinds) {
      for (const c of claims) this.cursors.delete(c.destination);
      return;
    }
    const last = new Map<string, { n: number; at: number; eventId: string }>();
    for (const r of rows) {
      if (r.destination === null || r.next_attempt_at === null) continue;
      const l = last.get(r.destination);
      if (!l) last.set(r.destination, { n: 1, at: r.next_attempt_at, eventId: r.event_id });
      else {
        l.n++;
        if (r.next_attempt_at > l.at || (r.next_attempt_at === l.at && r.event_id > l.eventId)) {
          l.at = r.next_attempt_at;
          l.eventId = r.event_id;
        }
      }
    }
    for (const c of claims) {
      const l = last.get(c.destination);
      if (!l || l.n < c.limit) this.cursors.delete(c.destination);
      else {
        const since = c.after ? (this.cursors.get(c.destination)?.since ?? now) : now;
        this.cursors.set(c.destination, { at: l.at, eventId: l.eventId, since });
      }
    }
  }

  /** An event of `destination` was handed back: it is behind the cursor. */
  rewind(destination: string): void {
    this.rewinds++;
    this.cursors.delete(destination);
  }
}
