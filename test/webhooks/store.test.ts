import fs from 'node:fs';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/db.js';
import type { Store } from '../../src/store/store.js';
import {
  claimDueEvents,
  dispatchCheckpointer,
  dueDestinations,
  finishManualAttempt,
  nextDueAt,
  openDispatchConnection,
  pendingDestinations,
  recordScheduledAttempts,
  type ClaimedEventRow,
  type ScheduledOutcome,
} from '../../src/store/webhooks.js';
import { testStoreUrl, TEST_DB } from '../helpers/db.js';
import { tempDir } from '../helpers/service.js';
import { webhookEventRow } from '../helpers/webhook-events.js';

/**
 * The dispatcher's own statements, one event at a time: the destinations with due events
 * (pendingDestinations), then the most overdue destination's claim (claimDueEvents, limit 1).
 */
async function claimDueEvent(
  store: Pick<Store, 'db' | 'dialect'>,
  spec: { leaseOwner: string; leaseMs: number; now: number; skipDestinations?: readonly string[] },
): Promise<ClaimedEventRow | undefined> {
  const skip = new Set(spec.skipDestinations ?? []);
  const due = (await pendingDestinations(store.db, '', 1_000))
    .filter((d) => !skip.has(d.destination) && d.dueAt <= spec.now)
    .sort((x, y) => x.dueAt - y.dueAt);
  for (const d of due) {
    const [row] = await claimDueEvents(store.db, store.dialect, {
      ...spec,
      destinations: [{ destination: d.destination, limit: 1 }],
    });
    if (row) return row;
  }
  return undefined;
}

/** Records one attempt as the dispatcher does (a batch of one); true when the event moved. */
async function finishScheduledAttempt(store: Store, eventId: string, o: ScheduledOutcome): Promise<boolean> {
  const { leaseOwner, ...rest } = o;
  return (await recordScheduledAttempts(store.db, store.dialect, leaseOwner, [{ ...rest, eventId }], [], o.now)).has(
    eventId,
  );
}

/** Gives a claimed event back as the dispatcher does at shutdown (the release list of a record batch). */
async function releaseEvent(store: Store, eventId: string, leaseOwner: string, now: number): Promise<void> {
  await recordScheduledAttempts(store.db, store.dialect, leaseOwner, [], [eventId], now);
}

let a: Store;
let b: Store;
const T0 = 1_700_000_000_000;
const LEASE = 1_000;

beforeAll(async () => {
  // Two stores on one database (a SQLite file, or PostgreSQL in that run): two dispatcher processes.
  const url = await testStoreUrl('mj-webhook-store-');
  a = await openStore(url);
  b = await openStore(url);
});
afterAll(async () => {
  await a?.close();
  await b?.close();
});

async function insertEvent(
  id: string,
  destination: string,
  nextAttemptAt: number | null,
  state: 'pending' | 'delivered' | 'failed' = 'pending',
) {
  await a.db
    .insertInto('webhook_events')
    .values(webhookEventRow(id, destination, nextAttemptAt, { body: '{}', state, created_at: T0, updated_at: T0 }))
    .execute();
}

describe('webhook outbox claims', () => {
  it('gives each due event to exactly one dispatcher, most overdue first, and nothing not yet due', async () => {
    for (let i = 0; i < 10; i++) await insertEvent(`e${i}`, `http://h${i % 3}.example`, T0 - 100 + i);
    await insertEvent('later', 'http://h0.example', T0 + 5_000);
    await insertEvent('done', 'http://h0.example', null, 'delivered');

    const got: Record<string, string[]> = { A: [], B: [] };
    for (;;) {
      const [x, y] = await Promise.all([
        claimDueEvent(a, { leaseOwner: 'A', leaseMs: LEASE, now: T0 }),
        claimDueEvent(b, { leaseOwner: 'B', leaseMs: LEASE, now: T0 }),
      ]);
      if (x) got.A!.push(x.event_id);
      if (y) got.B!.push(y.event_id);
      if (!x && !y) break;
    }
    const all = [...got.A!, ...got.B!];
    expect(new Set(all).size).toBe(all.length);
    expect(all.sort()).toEqual([...Array(10).keys()].map((i) => `e${i}`).sort());
    expect(await nextDueAt(a.db, T0)).toBe(T0 + 5_000);
  });

  it('hands an event whose dispatcher died back after its lease expires, and only then', async () => {
    expect(await claimDueEvent(b, { leaseOwner: 'B', leaseMs: LEASE, now: T0 + LEASE - 1 })).toBeUndefined();
    const again = await claimDueEvent(b, { leaseOwner: 'B', leaseMs: LEASE, now: T0 + LEASE + 1 });
    expect(again?.event_id).toBe('e0');
    const row = await b.db
      .selectFrom('webhook_events')
      .select('lease_owner')
      .where('event_id', '=', 'e0')
      .executeTakeFirst();
    expect(row?.lease_owner).toBe('B');
  });

  it('lets only the lease holder record the outcome', async () => {
    const now = T0 + LEASE + 2;
    const outcome = {
      claimedAttempts: 0,
      attempt: { startedAt: now, durationMs: 5, httpStatus: 500, error: 'HTTP 500', ok: false, manual: false },
      state: 'pending' as const,
      nextAttemptAt: now + 60_000,
      now,
    };
    // A (whose lease on e0 expired) finishes late: the attempt is recorded, the event does not move.
    expect(await finishScheduledAttempt(a, 'e0', { ...outcome, leaseOwner: 'A' })).toBe(false);
    expect(await finishScheduledAttempt(b, 'e0', { ...outcome, leaseOwner: 'B' })).toBe(true);
    const row = await a.db
      .selectFrom('webhook_events')
      .selectAll()
      .where('event_id', '=', 'e0')
      .executeTakeFirstOrThrow();
    expect(row).toMatchObject({ state: 'pending', attempts: 1, next_attempt_at: now + 60_000, lease_owner: null });
    const attempts = await a.db
      .selectFrom('webhook_attempts')
      .select(['attempt'])
      .where('event_id', '=', 'e0')
      .orderBy('id')
      .execute();
    expect(attempts.map((x) => x.attempt)).toEqual([1, 2]);
  });

  it('skips destinations the dispatcher has too many deliveries in flight to', async () => {
    await a.db
      .updateTable('webhook_events')
      .set({ state: 'delivered', next_attempt_at: null })
      .where('event_id', 'not in', ['f1', 'f2'])
      .execute();
    await insertEvent('f1', 'http://dead.example', T0 + 10_000);
    await insertEvent('f2', 'http://alive.example', T0 + 10_001);
    const now = T0 + 10_002;
    const got = await claimDueEvent(a, {
      leaseOwner: 'A',
      leaseMs: 60_000,
      now,
      skipDestinations: ['http://dead.example'],
    });
    expect(got?.event_id).toBe('f2');
    expect(
      await claimDueEvent(a, {
        leaseOwner: 'A',
        leaseMs: 60_000,
        now,
        skipDestinations: ['http://dead.example'],
      }),
    ).toBeUndefined();
    // Released (shutdown), it is due again at once.
    await releaseEvent(a, 'f2', 'A', now);
    expect(
      (
        await claimDueEvent(b, {
          leaseOwner: 'B',
          leaseMs: 60_000,
          now: now + 1,
          skipDestinations: ['http://dead.example'],
        })
      )?.event_id,
    ).toBe('f2');
    expect((await claimDueEvent(b, { leaseOwner: 'B', leaseMs: 60_000, now: now + 1 }))?.event_id).toBe('f1');
  });
});

describe('webhook outbox batches', () => {
  const T1 = T0 + 100_000;
  const attempt = (ok: boolean) => ({
    startedAt: T1,
    durationMs: 3,
    httpStatus: ok ? 200 : 500,
    error: ok ? null : 'HTTP 500',
    ok,
    manual: false,
  });

  it('claims per destination, each up to its own limit, most overdue first, in one statement', async () => {
    await a.db.updateTable('webhook_events').set({ state: 'delivered', next_attempt_at: null }).execute();
    for (let i = 0; i < 20; i++)
      await insertEvent(`dead${String(i).padStart(2, '0')}`, 'http://dead.example', T1 - 1_000 + i);
    await insertEvent('live1', 'http://live.example', T1 - 10);
    await insertEvent('live2', 'http://live.example', T1 - 5);
    await insertEvent('soon', 'http://soon.example', T1 + 5_000);

    const found = await pendingDestinations(a.db, '', 10);
    expect(found.map((d) => d.destination)).toEqual([
      'http://dead.example',
      'http://live.example',
      'http://soon.example',
    ]);
    expect(found.map((d) => d.dueAt)).toEqual([T1 - 1_000, T1 - 10, T1 + 5_000]);
    // The round-robin cursor: after 'dead', and a limit.
    expect((await pendingDestinations(a.db, 'http://dead.example', 1)).map((d) => d.destination)).toEqual([
      'http://live.example',
    ]);

    const got = await claimDueEvents(a.db, a.dialect, {
      leaseOwner: 'A',
      leaseMs: 60_000,
      now: T1,
      destinations: [
        { destination: 'http://dead.example', limit: 4 },
        { destination: 'http://live.example', limit: 4 },
        { destination: 'http://soon.example', limit: 4 },
      ],
    });
    expect(got.map((e) => e.event_id).sort()).toEqual(['dead00', 'dead01', 'dead02', 'dead03', 'live1', 'live2']);
    expect(got.every((e) => e.lease_expires_at === T1 + 60_000)).toBe(true);
    const leases = await a.db
      .selectFrom('webhook_events')
      .select(['lease_owner', 'lease_expires_at'])
      .where(
        'event_id',
        'in',
        got.map((e) => e.event_id),
      )
      .execute();
    expect(leases.every((r) => r.lease_owner === 'A' && Number(r.lease_expires_at) === T1 + 60_000)).toBe(true);
    // Exactly the rows returned carry the lease (SQLite reads them, then leases those rows by rowid).
    const leased = await a.db
      .selectFrom('webhook_events')
      .select('event_id')
      .where('state', '=', 'pending')
      .where('lease_owner', '=', 'A')
      .execute();
    expect(leased.map((r) => r.event_id).sort()).toEqual(got.map((e) => e.event_id).sort());
    // The other dispatcher gets the next ones of the backlog, never the same.
    const other = await claimDueEvents(b.db, b.dialect, {
      leaseOwner: 'B',
      leaseMs: 60_000,
      now: T1,
      destinations: [{ destination: 'http://dead.example', limit: 2 }],
    });
    expect(other.map((e) => e.event_id)).toEqual(['dead04', 'dead05']);
  });

  it('claims after a cursor: the events following it in (next_attempt_at, event_id) order, ties included', async () => {
    const T = T1 + 50_000;
    // Three events due at the same millisecond (one statement makes many due at once), two after.
    for (const id of ['cur-b', 'cur-a', 'cur-c']) await insertEvent(id, 'http://cursor.example', T - 100);
    await insertEvent('cur-d', 'http://cursor.example', T - 50);
    await insertEvent('cur-e', 'http://cursor.example', T - 10);
    const claim = (limit: number, after?: { at: number; eventId: string }) =>
      claimDueEvents(a.db, a.dialect, {
        leaseOwner: 'A',
        leaseMs: 60_000,
        now: T,
        destinations: [{ destination: 'http://cursor.example', limit, after }],
      });
    const first = await claim(2);
    expect(first.map((e) => e.event_id).sort()).toEqual(['cur-a', 'cur-b']);
    expect(first.map((e) => e.next_attempt_at)).toEqual([T - 100, T - 100]);
    // After cur-b (its tie cur-c follows it); the released cur-a, behind the cursor, is not taken.
    await releaseEvent(a, 'cur-a', 'A', T);
    expect((await claim(2, { at: T - 100, eventId: 'cur-b' })).map((e) => e.event_id).sort()).toEqual([
      'cur-c',
      'cur-d',
    ]);
    // From the head again: cur-a, then cur-e (the leased ones stepped over).
    expect((await claim(5)).map((e) => e.event_id).sort()).toEqual(['cur-a', 'cur-e']);
  });

  it('records a batch in one transaction: exact attempt numbers, lease-guarded moves, hand-backs', async () => {
    // live1 already has a manual attempt on record (a failed one: no change of state): the
    // scheduled one is number 2.
    const now = T1 + 50;
    await finishManualAttempt(
      a.db,
      'live1',
      { startedAt: T1, durationMs: 1, httpStatus: 500, error: 'HTTP 500', ok: false },
      T1,
    );
    const applied = await recordScheduledAttempts(
      a.db,
      a.dialect,
      'A',
      [
        { eventId: 'live1', claimedAttempts: 0, attempt: attempt(true), state: 'delivered', nextAttemptAt: null, now },
        {
          eventId: 'live2',
          claimedAttempts: 0,
          attempt: attempt(false),
          state: 'pending',
          nextAttemptAt: now + 60_000,
          now,
        },
        // Leased by B, not A: recorded, not moved.
        {
          eventId: 'dead04',
          claimedAttempts: 0,
          attempt: attempt(false),
          state: 'pending',
          nextAttemptAt: now + 60_000,
          now,
        },
      ],
      ['dead00', 'dead01'],
      now,
    );
    expect([...applied].sort()).toEqual(['live1', 'live2']);
    const rows = await a.db
      .selectFrom('webhook_events')
      .select(['event_id', 'state', 'attempts', 'next_attempt_at', 'lease_owner'])
      .where('event_id', 'in', ['live1', 'live2', 'dead04', 'dead00', 'dead01', 'dead02'])
      .orderBy('event_id')
      .execute();
    expect(
      rows.map((r) => [
        r.event_id,
        r.state,
        r.attempts,
        r.next_attempt_at === null ? null : r.next_attempt_at,
        r.lease_owner,
      ]),
    ).toEqual([
      ['dead00', 'pending', 0, T1 - 1_000, null],
      ['dead01', 'pending', 0, T1 - 999, null],
      ['dead02', 'pending', 0, T1 - 998, 'A'],
      ['dead04', 'pending', 0, T1 - 996, 'B'],
      ['live1', 'delivered', 1, null, null],
      ['live2', 'pending', 1, now + 60_000, null],
    ]);
    const numbers = await a.db
      .selectFrom('webhook_attempts')
      .select(['event_id', 'attempt', 'manual'])
      .where('event_id', 'in', ['live1', 'live2', 'dead04'])
      .orderBy('id')
      .execute();
    expect(numbers.map((n) => [n.event_id, n.attempt, n.manual])).toEqual([
      ['live1', 1, 1],
      ['live1', 2, 0],
      ['live2', 1, 0],
      ['dead04', 1, 0],
    ]);
    // Handed back: due again at once, for anyone.
    const again = await claimDueEvents(b.db, b.dialect, {
      leaseOwner: 'B',
      leaseMs: 60_000,
      now,
      destinations: [{ destination: 'http://dead.example', limit: 2 }],
    });
    expect(again.map((e) => e.event_id)).toEqual(['dead00', 'dead01']);
    expect(await nextDueAt(a.db, now)).toBe(T1 + 5_000);
    // B's own attempt at dead04 comes after A's (recorded above without moving it): number 2.
    const mine = [
      {
        eventId: 'dead04',
        claimedAttempts: 0,
        attempt: attempt(true),
        state: 'delivered' as const,
        nextAttemptAt: null,
        now,
      },
    ];
    expect([...(await recordScheduledAttempts(b.db, b.dialect, 'B', mine, [], now))]).toEqual(['dead04']);
    const dead04 = await a.db
      .selectFrom('webhook_attempts')
      .select(['attempt', 'ok'])
      .where('event_id', '=', 'dead04')
      .orderBy('id')
      .execute();
    expect(dead04.map((n) => [n.attempt, n.ok])).toEqual([
      [1, 0],
      [2, 1],
    ]);
  });

  it('finds the destinations of the claimable events, most overdue first, and says when that is all of them', async () => {
    await a.db.updateTable('webhook_events').set({ state: 'delivered', next_attempt_at: null }).execute();
    const T2 = T1 + 100_000;
    // Receivers in back-off: their events are pending, none due.
    for (let i = 0; i < 30; i++) await insertEvent(`wait${i}`, `http://wait${i}.example`, T2 + 60_000 + i);
    await insertEvent('old', 'http://slow.example', T2 - 500);
    await insertEvent('new1', 'http://fast.example', T2 - 100);
    await insertEvent('new2', 'http://fast.example', T2 - 50);
    await insertEvent('held', 'http://held.example', T2 - 1_000);
    await a.db
      .updateTable('webhook_events')
      .set({ lease_owner: 'A', lease_expires_at: T2 + 1_000 })
      .where('event_id', '=', 'held')
      .execute();

    // A leased event is not claimable (until its lease runs out); the destinations in back-off are not read.
    expect(await dueDestinations(a.db, T2, 10)).toEqual({
      destinations: ['http://slow.example', 'http://fast.example'],
      complete: true,
    });
    expect(await dueDestinations(a.db, T2 + 2_000, 10)).toEqual({
      destinations: ['http://held.example', 'http://slow.example', 'http://fast.example'],
      complete: true,
    });
    // Three claimable events in a range of three: there may be more behind them.
    expect(await dueDestinations(a.db, T2, 3)).toEqual({
      destinations: ['http://slow.example', 'http://fast.example'],
      complete: false,
    });
    expect(await dueDestinations(a.db, T2 - 10_000, 10)).toEqual({ destinations: [], complete: true });
  });
});

describe("the dispatcher's own SQLite connection", () => {
  const T2 = T0 + 200_000;
  const spec = (now: number, limit = 10) => ({
    leaseOwner: 'A',
    leaseMs: 60_000,
    now,
    destinations: [{ destination: 'http://own.example', limit }],
  });

  it.runIf(TEST_DB === 'sqlite')(
    'claims and records on it, and waits for a transaction open on the store',
    async () => {
      const close = openDispatchConnection(a.db);
      expect(close).toBeTypeOf('function');
      try {
        await a.db.updateTable('webhook_events').set({ state: 'delivered', next_attempt_at: null }).execute();
        await insertEvent('own1', 'http://own.example', T2 - 10);
        const [first] = await claimDueEvents(a.db, a.dialect, spec(T2, 1));
        expect(first?.event_id).toBe('own1');
        const moved = await recordScheduledAttempts(
          a.db,
          a.dialect,
          'A',
          [
            {
              eventId: 'own1',
              claimedAttempts: 0,
              attempt: { startedAt: T2, durationMs: 1, httpStatus: 200, error: null, ok: true },
              state: 'delivered',
              nextAttemptAt: null,
              now: T2,
            },
          ],
          [],
          T2,
        );
        expect([...moved]).toEqual(['own1']);
        // Committed: the store's own connection reads it.
        const row = await a.db
          .selectFrom('webhook_events')
          .select(['state', 'lease_owner'])
          .where('event_id', '=', 'own1')
          .executeTakeFirstOrThrow();
        expect(row).toEqual({ state: 'delivered', lease_owner: null });

        // A transaction open on the store's connection holds the write lock: a claim made meanwhile
        // runs after it (on its own connection it would wait for a lock this thread holds), and sees
        // what it wrote.
        let commit!: () => void;
        const gate = new Promise<void>((r) => (commit = r));
        const trx = a.db.transaction().execute(async (t) => {
          await t
            .insertInto('webhook_events')
            .values({
              event_id: 'own2',
              job_uuid: 'job-own2',
              owner: 'o',
              event_type: 'job.completed',
              url: 'http://own.example/hook',
              destination: 'http://own.example',
              secret: null,
              body: '{}',
              state: 'pending',
              next_attempt_at: T2 - 5,
              lease_owner: null,
              lease_expires_at: null,
              created_at: T2,
              updated_at: T2,
            })
            .execute();
          await gate;
        });
        await new Promise((r) => setTimeout(r, 20));
        const claim = claimDueEvents(a.db, a.dialect, spec(T2));
        commit();
        await trx;
        expect((await claim).map((e) => e.event_id)).toEqual(['own2']);
      } finally {
        await close?.();
      }
      // Closed: claims go through the store's connection again.
      await insertEvent('own3', 'http://own.example', T2 - 1);
      expect((await claimDueEvents(a.db, a.dialect, spec(T2))).map((e) => e.event_id)).toEqual(['own3']);
    },
  );

  it.runIf(TEST_DB === 'sqlite')(
    'leaves the WAL checkpoints to a thread of their own, which puts what it wrote in the database file',
    async () => {
      const dir = tempDir('mj-webhook-checkpoint-');
      const file = path.join(dir, 'db.sqlite');
      const store = await openStore(`sqlite:${file}`);
      const close = openDispatchConnection(store.db);
      try {
        const checkpointer = dispatchCheckpointer(store.db)!;
        expect(checkpointer).toBeDefined();
        await store.db
          .insertInto('webhook_events')
          .values({
            event_id: 'ck1',
            job_uuid: 'job-ck1',
            owner: 'o',
            event_type: 'job.completed',
            url: 'http://ck.example/hook',
            destination: 'http://ck.example',
            secret: null,
            body: '{}',
            state: 'pending',
            next_attempt_at: T2 - 1,
            lease_owner: null,
            lease_expires_at: null,
            created_at: T2,
            updated_at: T2,
          })
          .execute();
        const spec = {
          leaseOwner: 'A',
          leaseMs: 60_000,
          now: T2,
          destinations: [{ destination: 'http://ck.example', limit: 1 }],
        };
        // The dispatcher connection's first commit asks for a checkpoint (then one per CHECKPOINT_ROWS).
        expect((await claimDueEvents(store.db, store.dialect, spec)).map((e) => e.event_id)).toEqual(['ck1']);
        await checkpointer.idle();
        expect(checkpointer.done.runs).toBe(1);

        // The database file alone, without its WAL: the event and its lease are in it.
        const copy = path.join(dir, 'copy.sqlite');
        fs.copyFileSync(file, copy);
        const alone = new SQLite(copy, { readonly: true });
        try {
          const row = alone.prepare(`SELECT state, lease_owner FROM webhook_events WHERE event_id = 'ck1'`).get();
          expect(row).toEqual({ state: 'pending', lease_owner: 'A' });
        } finally {
          alone.close();
        }
      } finally {
        await close?.();
        await store.close();
      }
    },
  );

  it.runIf(TEST_DB !== 'sqlite')("is SQLite's only", () => {
    expect(openDispatchConnection(a.db)).toBeUndefined();
  });
});
