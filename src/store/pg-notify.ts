import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import type { Logger } from 'pino';
import { SIGNAL_NAMES, type SignalName, type Signals } from '../signals.js';
import type { Store } from './store.js';
import { isDatabaseUnavailable } from './errors.js';
import { Backoff } from '../runtime/backoff.js';

const CHANNEL = 'media_jobs';
const NAMES = new Set<SignalName>(SIGNAL_NAMES);
/** NOTIFY payloads must stay under 8000 bytes: several signals share one, split past this. */
const MAX_PAYLOAD = 7000;

export interface BridgeOptions {
  /** Reconnect delays: first, doubling up to max (each with jitter, so processes spread out). */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** A `SELECT 1` on the LISTEN connection this often: a silently dead peer is noticed. */
  heartbeatMs?: number;
  connectTimeoutMs?: number;
}

/** Delivers the signals of "<origin> <name> <arg>[\n<name> <arg>…]" (one NOTIFY may carry a batch) unless they are our own. */
function deliverPayload(signals: Signals, origin: string, payload: string): void {
  const [head = '', ...rest] = payload.split('\n');
  const [from, name, arg = ''] = head.split(' ');
  if (from === origin) return;
  for (const [n, a = ''] of [[name, arg], ...rest.map((l) => l.split(' '))]) {
    if (NAMES.has(n as SignalName)) signals.deliver(n as SignalName, a);
  }
}

/** "<origin> <name> <arg>[\n<name> <arg>…]" payloads, each under MAX_PAYLOAD bytes. */
function payloads(origin: string, list: ReadonlyArray<readonly [SignalName, string]>): string[] {
  const out: string[] = [];
  let current = '';
  for (const [name, arg] of list) {
    const line = `${name} ${arg}`;
    if (current !== '' && current.length + line.length + 1 > MAX_PAYLOAD) {
      out.push(current);
      current = '';
    }
    current = current === '' ? `${origin} ${line}` : `${current}\n${line}`;
  }
  if (current !== '') out.push(current);
  return out;
}

/**
 * Asks the LISTEN connection a question: a peer that vanished without RST/FIN (a blackholed
 * network) is only noticed by talking to it.
 */
function probe(c: pg.Client, timeoutMs: number, lost: (c: pg.Client, err: unknown) => void): void {
  // Destroying the socket (not a polite end(), which would wait on the dead peer) fires 'error'.
  const dead = setTimeout(() => {
    const err = Object.assign(new Error(`LISTEN heartbeat unanswered for ${timeoutMs} ms`), { code: 'ETIMEDOUT' });
    (c as unknown as { connection: { stream: { destroy(e: Error): void } } }).connection.stream.destroy(err);
  }, timeoutMs);
  c.query('SELECT 1').then(
    () => {
      clearTimeout(dead);
    },
    (err: unknown) => {
      clearTimeout(dead);
      lost(c, err);
    },
  );
}

/**
 * Signals out through NOTIFY. Fire-and-forget: a lost NOTIFY only means the next poll finds the
 * work. During an outage the pool logs the outage once; a failed NOTIFY adds nothing.
 */
function notifyTransport(store: Store, origin: string, log: Logger): NonNullable<Signals['transport']> {
  return {
    publish(name, arg) {
      sql`SELECT pg_notify(${CHANNEL}, ${`${origin} ${name} ${arg}`})`.execute(store.db).catch((err: unknown) => {
        if (!isDatabaseUnavailable(err)) log.warn({ err }, 'NOTIFY failed');
      });
    },
    async publishWithin(db, list) {
      const values = sql.join(payloads(origin, list).map((p) => sql`pg_notify(${CHANNEL}, ${p})`));
      await sql`SELECT ${values}`.execute(db as typeof store.db);
    },
    notifyExpression(list) {
      const all = payloads(origin, list);
      return all.length === 1 ? sql`pg_notify(${CHANNEL}, ${all[0]})` : undefined;
    },
  };
}

/**
 * Bridges Signals across processes with LISTEN/NOTIFY: a submit on one API process wakes a
 * worker on another machine in milliseconds, a cancel reaches the worker running the job.
 * Payload: "<origin> <name> <arg>"; a process ignores its own notifications.
 *
 * The LISTEN connection is kept for good: lost, it is reopened with capped exponential backoff
 * until the database is back (polling covers the gap), and then every local consumer is woken,
 * since notifications sent while it was gone are lost.
 */
export async function bridgeSignals(
  store: Store,
  signals: Signals,
  log: Logger,
  opts: BridgeOptions = {},
): Promise<() => Promise<void>> {
  const origin = randomBytes(6).toString('hex');
  const listen = new ListenConnection(store, signals, log, origin, opts);
  await listen.open();
  signals.transport = notifyTransport(store, origin, log);
  return async () => {
    signals.transport = undefined;
    await listen.close();
  };
}

/** The one LISTEN connection of a process: reopened with backoff when lost, probed by a heartbeat. */
class ListenConnection {
  private client: pg.Client | undefined;
  private closed = false;
  private retry: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private readonly backoff: Backoff;
  /** When the connection was lost (undefined while it is up): one line when lost, one when back. */
  private lostAt: number | undefined;
  private readonly heartbeatMs: number;
  private readonly connectTimeoutMs: number;

  constructor(
    private readonly store: Store,
    private readonly signals: Signals,
    private readonly log: Logger,
    private readonly origin: string,
    opts: BridgeOptions,
  ) {
    const { backoffMs = 250, maxBackoffMs = 10_000, heartbeatMs = 15_000, connectTimeoutMs = 5_000 } = opts;
    this.backoff = new Backoff({ firstMs: backoffMs, maxMs: maxBackoffMs, jitter: 'half' });
    this.heartbeatMs = heartbeatMs;
    this.connectTimeoutMs = connectTimeoutMs;
  }

  /** Connects; a failure is logged and retried in the background (the service works without it: workers poll). */
  async open(): Promise<void> {
    // A peer that vanished without RST/FIN is only noticed by talking to it.
    this.heartbeat = setInterval(() => {
      if (this.client) probe(this.client, this.connectTimeoutMs, this.lost);
    }, this.heartbeatMs);
    this.heartbeat.unref();
    try {
      await this.connect();
    } catch (err) {
      this.lostAt = performance.now();
      this.log.warn({ err }, 'LISTEN connection failed; retrying with backoff (polling covers the gap)');
      this.schedule();
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    clearInterval(this.heartbeat);
    const c = this.client;
    this.client = undefined;
    await c?.end().catch(() => {});
  }

  private readonly lost = (c: pg.Client, err: unknown): void => {
    if (c !== this.client) return; // a stale client, already replaced or never adopted
    this.client = undefined;
    c.end().catch(() => {});
    if (this.lostAt === undefined) {
      this.lostAt = performance.now();
      this.log.warn({ err }, 'LISTEN connection lost; reconnecting with backoff (polling covers the gap)');
    }
    this.schedule();
  };

  private async connect(): Promise<void> {
    const c = new pg.Client({
      connectionString: this.store.url,
      connectionTimeoutMillis: this.connectTimeoutMs,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
    });
    // Permanent: an 'error' without a listener would kill the process.
    c.on('error', (err) => this.lost(c, err));
    c.on('end', () => this.lost(c, new Error('LISTEN connection ended')));
    c.on('notification', (msg) => deliverPayload(this.signals, this.origin, msg.payload ?? ''));
    try {
      await c.connect();
      await c.query(`LISTEN ${CHANNEL}`);
    } catch (err) {
      c.end().catch(() => {});
      throw err;
    }
    if (this.closed) return void c.end().catch(() => {});
    this.client = c;
    this.backoff.reset();
    if (this.lostAt !== undefined) {
      this.log.info({ down_ms: Math.round(performance.now() - this.lostAt) }, 'LISTEN connection restored');
      this.lostAt = undefined;
      // Whatever was submitted meanwhile sent no notification we heard: look now, not at the next poll.
      this.signals.deliver('job-queued', '');
    }
  }

  private schedule(): void {
    if (this.closed || this.retry) return;
    const delay = this.backoff.next();
    this.retry = setTimeout(() => {
      this.retry = undefined;
      this.connect().catch((err: unknown) => {
        if (this.lostAt === undefined) {
          this.lostAt = performance.now();
          this.log.warn({ err }, 'LISTEN connection failed; retrying with backoff (polling covers the gap)');
        }
        this.schedule();
      });
    }, delay);
    this.retry.unref();
  }
}
