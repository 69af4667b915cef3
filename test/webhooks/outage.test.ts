import SQLite from 'better-sqlite3';
import { createServer, type Server } from 'node:http';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { Signals } from '../../src/signals.js';
import { openStore } from '../../src/store/db.js';
import type { Store } from '../../src/store/store.js';
import { WebhookDispatcher } from '../../src/webhooks/dispatcher.js';
import { WebhookSender } from '../../src/webhooks/send.js';
import { TEST_DB } from '../helpers/db.js';
import { tempDir, waitFor } from '../helpers/service.js';
import { webhookEventRow } from '../helpers/webhook-events.js';

// SQLite only: another connection holding the write lock is a real "database unavailable"
// (SQLITE_BUSY once busy_timeout runs out), with no mock. The PostgreSQL restart is the lead's
// fault test (test/reliability).
const cleanup: Array<() => unknown> = [];
afterAll(async () => {
  for (const f of cleanup.reverse()) await f();
});

describe.skipIf(TEST_DB !== 'sqlite')('webhook dispatcher while the database is unavailable', () => {
  it('keeps attempts it could not record, records them once the database is back, and warns once', async () => {
    const file = path.join(tempDir('mj-webhook-outage-'), 'db.sqlite');
    const store: Store = await openStore(`sqlite:${file}`);
    cleanup.push(() => store.close());

    // A receiver that holds every request until the test lets it answer.
    const requests: string[] = [];
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const server: Server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        requests.push(String(req.headers['x-service-event-id']));
        void gate.then(() => res.end('ok'));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.push(() => new Promise((r) => server.close(r)));
    const origin = `http://127.0.0.1:${(server.address() as { port: number }).port}`;

    const now = Date.now();
    const ids = ['ev-a', 'ev-b', 'ev-c'];
    await store.db
      .insertInto('webhook_events')
      .values(ids.map((id) => webhookEventRow(id, origin, now)))
      .execute();

    const lines: Array<{ level: number; msg: string }> = [];
    const log = pino(
      { level: 'info' },
      new Writable({
        write(chunk, _enc, done) {
          lines.push(JSON.parse(String(chunk)));
          done();
        },
      }),
    );
    const sender = new WebhookSender({ allowPrivate: true, timeoutMs: 30_000, clock: systemClock });
    cleanup.push(() => sender.close());
    const dispatcher = new WebhookDispatcher({
      store,
      clock: systemClock,
      signals: new Signals(),
      log,
      sender,
      scheduleMs: [0, 60_000],
      timeoutMs: 30_000,
      concurrency: 4,
      perDestination: 4,
      pollMs: 100,
    });
    dispatcher.start();
    cleanup.push(() => dispatcher.stop(1_000));

    // All three are claimed and in flight; now another connection takes the write lock.
    await waitFor(() => requests.length === 3, 'three requests in flight');
    const locker = new SQLite(file);
    locker.exec('BEGIN IMMEDIATE');
    open();

    const warned = (what: RegExp) => lines.filter((l) => l.level === 40 && what.test(l.msg));
    await waitFor(() => warned(/database unavailable/).length > 0, 'the outage warning', 60_000);
    await waitFor(() => dispatcher.unrecorded === 3, 'three finished attempts held for recording', 60_000);
    // Let it fail to record for a while (several backoff rounds), then give the database back.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(dispatcher.unrecorded).toBe(3);
    locker.exec('ROLLBACK');
    locker.close();

    const rows = await waitFor(
      async () => {
        const r = await store.db
          .selectFrom('webhook_events')
          .select(['event_id', 'state', 'attempts', 'lease_owner'])
          .orderBy('event_id')
          .execute();
        return r.every((e) => e.state === 'delivered') ? r : undefined;
      },
      'the three deliveries recorded as delivered',
      60_000,
    );
    expect(rows.map((r) => [r.event_id, r.state, r.attempts, r.lease_owner])).toEqual(
      ids.map((id) => [id, 'delivered', 1, null]),
    );
    const attempts = await store.db
      .selectFrom('webhook_attempts')
      .select(['event_id', 'attempt', 'http_status', 'ok'])
      .orderBy('event_id')
      .execute();
    expect(attempts.map((a) => [a.event_id, a.attempt, Number(a.http_status), a.ok])).toEqual(
      ids.map((id) => [id, 1, 200, 1]),
    );
    // Sent once each (the leases were never lost), one warning for the whole outage, one recovery.
    expect(requests.sort()).toEqual(ids);
    expect(warned(/database unavailable/)).toHaveLength(1);
    expect(lines.filter((l) => /database is back/.test(l.msg))).toHaveLength(1);
    expect(dispatcher.unrecorded).toBe(0);
  }, 120_000);
});
