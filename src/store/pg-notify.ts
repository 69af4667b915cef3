import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import type { Logger } from 'pino';
import type { SignalName, Signals } from '../signals.js';
import type { Store } from './db.js';

const CHANNEL = 'media_jobs';
const NAMES = new Set<SignalName>(['job-queued', 'job-cancelled', 'job-finished']);

/**
 * Bridges Signals across processes with LISTEN/NOTIFY: a submit on one API process wakes a
 * worker on another machine in milliseconds, a cancel reaches the worker running the job.
 * Payload: "<origin> <name> <arg>"; a process ignores its own notifications.
 */
export async function bridgeSignals(store: Store, signals: Signals, log: Logger): Promise<() => Promise<void>> {
  const origin = randomBytes(6).toString('hex');
  let client: pg.Client | undefined;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;

  const connect = async () => {
    const c = new pg.Client({ connectionString: store.url });
    c.on('notification', (msg) => {
      const [from, name, arg = ''] = (msg.payload ?? '').split(' ');
      if (from === origin || !NAMES.has(name as SignalName)) return;
      signals.deliver(name as SignalName, arg);
    });
    c.on('error', (err) => {
      log.warn({ err }, 'LISTEN connection lost; reconnecting (polling covers the gap)');
      c.end().catch(() => {});
      if (!closed) retry = setTimeout(() => void connect().catch(() => {}), 1000);
    });
    await c.connect();
    await c.query(`LISTEN ${CHANNEL}`);
    client = c;
  };
  await connect();

  // Fire-and-forget: a lost NOTIFY only means the next poll finds the work.
  signals.transport = {
    publish(name, arg) {
      sql`SELECT pg_notify(${CHANNEL}, ${`${origin} ${name} ${arg}`})`.execute(store.db).catch((err) => log.warn({ err }, 'NOTIFY failed'));
    },
  };
  return async () => {
    closed = true;
    clearTimeout(retry);
    signals.transport = undefined;
    await client?.end().catch(() => {});
  };
}
