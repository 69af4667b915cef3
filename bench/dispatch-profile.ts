/**
 * CPU of the webhook dispatcher alone, in this process, against raw undici in the same process:
 * the A/B tool of the dispatch speed (issue 30). The receiver (bench/helper-server.ts) runs in a
 * child process, so this process's CPU is the sender's only.
 *
 *   DB=sqlite|postgres N=3000 WARM=3000 ROUNDS=3 [PROFILE=file.cpuprofile|file.heapprofile] [PROFILE_RAW=file]
 *     [PROFILE_INTERVAL=µs between CPU samples, default 50] [LOG_LEVEL=warn]
 *     [FF=webhook_events' fillfactor on PostgreSQL, for A/B runs: 100 is the one before migration 013]
 *     [JOB_INDEX=btree: on PostgreSQL, the job index before migration 016]
 *     [POLL_MS=how often the burst's end is polled for, default 50 (10 before 2026-11-26 15:00)]
 *     [TRACE=file: the last round's claims, looks, recordings and empty send windows, timed]
 *   node --import tsx bench/dispatch-profile.ts
 *
 * Each round: WARM events delivered first (JIT warm-up, not measured), then N due events written
 * in one statement and delivered by the running dispatcher; then the same N bodies posted by raw
 * undici (a Pool of 4, 4 in flight, fresh signatures per attempt, as bench/scenarios/webhooks.ts).
 * Prints CPU µs per delivery (user + system of this process over the burst, the recording of its
 * attempts included, the writing of the events not) and deliveries/s at the receiver, for both. PROFILE writes a CPU profile of
 * the last round's dispatcher burst only (a sampling heap profile, allocations, if named *.heapprofile).
 * On PostgreSQL it prints the server backends' CPU per delivery too, and the tables' HOT updates.
 * For both senders, the receiver's CPU per delivery: on two cores the three processes (sender,
 * server, receiver) share the CPU, so the rate follows their sum per delivery.
 * Where the dispatcher's wall time goes: the event loop's utilisation over the burst, and the share
 * of the burst's sending span with fewer than 4 attempts in flight, and with none (the claims did
 * not keep up).
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import { Session } from 'node:inspector/promises';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import pg from 'pg';
import { Pool } from 'undici';
import { v7 as timeOrderedUuid } from 'uuid';
import { systemClock } from '../src/clock.js';
import { Metrics } from '../src/metrics.js';
import { Signals } from '../src/signals.js';
import { openStore } from '../src/store/db.js';
import { WAKE_SIGNAL, WebhookDispatcher } from '../src/webhooks/dispatcher.js';
import { dispatchCheckpointer } from '../src/store/webhooks.js';
import { WebhookSender } from '../src/webhooks/send.js';
import {
  cpuMicros,
  createPgDatabase,
  dropPgDatabase,
  freePort,
  httpClient,
  inParallel,
  insertWebhookEvents,
  rawDelivery,
  serverBackendsCpu,
  spawnChild,
} from './lib.js';

const N = Number(process.env.N ?? 3000);
const WARM = Number(process.env.WARM ?? 3000);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const IN_FLIGHT = 4;
const SECRET = 'whsec_bench_secret';

interface Stats {
  delivered: number;
  firstAt: number;
  lastOkAt: number;
  connections: number;
}

const port = await freePort();
const origin = `http://127.0.0.1:${port}`;
const receiver = await spawnChild('receiver', 'helper-server.ts', [], { PORT: String(port) });
const rc = httpClient(origin, '', 1);
const stats = async () => (await rc.call<Stats>('GET', '/stats')).json;
const reset = () => rc.call('POST', '/reset?mode=ok');
/** The receiver's CPU so far, µs (clock ticks of 10 ms: ~0.5 µs per delivery over 20,000). */
const receiverCpu = () => cpuMicros(receiver.pid) ?? 0;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mj-dprof-'));
const url = process.env.DB === 'postgres' ? await createPgDatabase() : `sqlite:${path.join(dir, 'db.sqlite')}`;
const store = await openStore(url);

/**
 * On PostgreSQL (a server on this machine), the CPU its backends serving the bench database have
 * used so far (serverBackendsCpu), read through a connection of its own; and the table's updates
 * so far, HOT ones apart.
 */
const admin = process.env.DB === 'postgres' ? new pg.Client({ connectionString: url }) : undefined;
await admin?.connect();
if (process.env.FF) await admin?.query(`ALTER TABLE webhook_events SET (fillfactor = ${Number(process.env.FF)})`);
if (process.env.JOB_INDEX === 'btree')
  await admin?.query('DROP INDEX webhook_events_job; CREATE INDEX webhook_events_job ON webhook_events (job_uuid)');
const serverCpu = async () => (admin ? serverBackendsCpu(admin) : undefined);
async function tableUpdates(): Promise<string> {
  if (!admin) return '';
  await new Promise((r) => setTimeout(r, 1_500)); // backends flush their counters at most once a second
  const { rows } = await admin.query<{ relname: string; ins: string; upd: string; hot: string }>(
    `SELECT relname, n_tup_ins AS ins, n_tup_upd AS upd, n_tup_hot_upd AS hot FROM pg_stat_user_tables
      WHERE relname IN ('webhook_events', 'webhook_attempts') ORDER BY relname`,
  );
  return rows.map((r) => `${r.relname}: ${r.ins} inserted, ${r.upd} updated (${r.hot} HOT)`).join('; ');
}

/** Writes `n` due events in one statement; returns their ids and bodies. */
async function insertEvents(n: number): Promise<Array<{ id: string; body: string }>> {
  const now = Date.now();
  const rows = Array.from({ length: n }, () => {
    // Time-ordered (UUIDv7), as the service's are (src/jobs/outbox.ts).
    const id = timeOrderedUuid();
    const job = randomUUID(); // random, as the service's jobs' (src/jobs/service.ts)
    const body = JSON.stringify({
      event_id: id,
      event_type: 'job.cancelled',
      occurred_at: new Date(now).toISOString(),
      job: {
        uuid: job,
        status: 'cancelled',
        status_detail: 'cancelled by the client',
        error_message: null,
        error_type: null,
        result_ready: false,
      },
    });
    return {
      event_id: id,
      job_uuid: job,
      owner: 'o',
      event_type: 'job.cancelled',
      url: `${origin}/hook`,
      destination: origin,
      secret: SECRET,
      body,
      state: 'pending' as const,
      next_attempt_at: now,
      lease_owner: null,
      lease_expires_at: null,
      created_at: now,
      updated_at: now,
    };
  });
  await store.db.transaction().execute((trx) => insertWebhookEvents(trx, rows));
  return rows.map((r) => ({ id: r.event_id, body: r.body }));
}

/**
 * Polls `fn` every POLL_MS. Its polls (an HTTP call to the receiver, a count query) are this
 * process's CPU too, counted in the dispatcher's burst (the raw undici burst has none): every 10 ms
 * they came to ~1 µs per delivery of a burst of 3,000 (3 pairs, PostgreSQL: medians 68 and 67 µs).
 */
const POLL_MS = Number(process.env.POLL_MS ?? 50);
async function until(what: string, fn: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

const pending = async () =>
  Number(
    (
      await store.db
        .selectFrom('webhook_events')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('state', '=', 'pending')
        .executeTakeFirstOrThrow()
    ).n,
  );

const log = pino({ level: process.env.LOG_LEVEL ?? 'warn' }, fs.createWriteStream('/dev/null'));
const signals = new Signals();
const sender = new WebhookSender({ allowPrivate: true, timeoutMs: 10_000, clock: systemClock });
const d = new WebhookDispatcher({
  store,
  clock: systemClock,
  signals,
  log,
  sender,
  metrics: new Metrics(store),
  scheduleMs: [0, 60_000, 300_000, 1_800_000, 21_600_000],
  timeoutMs: 10_000,
  concurrency: 64,
});
d.start();

/**
 * Where the burst's wall time goes: how long the send window (IN_FLIGHT per destination) was below
 * full, and how long it was empty, between the first attempt's start and the last one's end. Counted
 * around the sender's start() and each attempt's end (one performance.now() each).
 */
const window = { inFlight: 0, since: 0, belowMs: 0, emptyMs: 0, first: 0, last: 0 };
/**
 * TRACE=file: the last round's timeline there, in ms from its first attempt: each claim pass that
 * changed what is held, each look and recording, and each time the window stood empty over 1 ms.
 */
const trace: string[] | undefined = process.env.TRACE ? [] : undefined;
const at = () => (performance.now() - window.first).toFixed(1);
if (trace) {
  const dp = d as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
  for (const name of ['claimPass', 'write', 'look']) {
    const f = dp[name]!.bind(d);
    dp[name] = async (...a: unknown[]) => {
      const held = () => (d as unknown as { totalHeld(): number }).totalHeld();
      const t0 = at();
      const h0 = held();
      const n = name === 'write' ? (a[0] as unknown[]).length : '';
      const r = await f(...a);
      if (name !== 'claimPass' || held() !== h0)
        trace.push(`${t0}-${at()} ${name} ${n} (held ${h0} -> ${held()}, ${d.unrecorded} unrecorded)`);
      return r;
    };
  }
}
const tick = (delta: number) => {
  const t = performance.now();
  if (trace && window.inFlight === 0 && delta === 1 && window.first !== 0 && t - window.since > 1)
    trace.push(`${(window.since - window.first).toFixed(1)}-${at()} EMPTY`);
  if (window.first === 0) window.first = window.since = t;
  const dt = t - window.since;
  if (window.inFlight < IN_FLIGHT) window.belowMs += dt;
  if (window.inFlight === 0) window.emptyMs += dt;
  window.inFlight += delta;
  window.since = window.last = t;
};
const start = sender.start.bind(sender);
sender.start = (event, done) => {
  tick(1);
  return start(event, (result, aborted) => {
    tick(-1);
    done(result, aborted);
  });
};

interface Burst {
  cpuUs: number;
  /** Of cpuUs, the user-space part (JavaScript and libraries; the rest is the kernel's, the sockets' syscalls). */
  userUs: number;
  /** PostgreSQL's backends' CPU per delivery, and how many backends served the burst. */
  server?: { us: number; backends: number };
  /** The receiver process's CPU per delivery (the same receiver for both senders). */
  receiverUs: number;
  rate: number;
  connections: number;
  /** The event loop's longest delay in the burst, and its 99th percentile (ms): how long the thread was held. */
  loopMaxMs?: number;
  loopP99Ms?: number;
  /** The event loop's utilisation over the burst, and the shares of the sending span below full and empty. */
  elu?: number;
  belowFull?: number;
  empty?: number;
  /** SQLite: what the dispatcher connection's checkpointing thread did in the burst. */
  checkpoints?: string;
}

/** Delivers `n` fresh events through the running dispatcher; CPU until all are recorded. */
async function startProfile(file?: string): Promise<() => Promise<void>> {
  if (!file) return async () => undefined;
  const session = new Session();
  session.connect();
  if (file.endsWith('.heapprofile')) {
    // Where the burst allocates (what the garbage collector then spends its time on).
    await session.post('HeapProfiler.startSampling', {
      samplingInterval: 1024,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
    return async () => {
      const { profile } = await session.post('HeapProfiler.stopSampling');
      fs.writeFileSync(file, JSON.stringify(profile));
      session.disconnect();
    };
  }
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 50 });
  await session.post('Profiler.start');
  return async () => {
    const { profile } = await session.post('Profiler.stop');
    fs.writeFileSync(file, JSON.stringify(profile));
    session.disconnect();
  };
}

async function dispatcherBurst(n: number, profile?: string): Promise<Burst> {
  await reset();
  // Written before the measurement: the bench's dispatcher process does not write its outbox either.
  await insertEvents(n);
  const stopProfile = await startProfile(profile);
  const server0 = await serverCpu();
  const ckpt = dispatchCheckpointer(store.db)?.done;
  const ckpt0 = ckpt && { ...ckpt };
  if (ckpt) ckpt.maxMs = ckpt.maxFrames = 0;
  const receiver0 = receiverCpu();
  const cpu0 = process.cpuUsage();
  const loop = monitorEventLoopDelay({ resolution: 5 });
  loop.enable();
  Object.assign(window, { inFlight: 0, since: 0, belowMs: 0, emptyMs: 0, first: 0, last: 0 });
  trace?.splice(0);
  const elu0 = performance.eventLoopUtilization();
  signals.deliver(WAKE_SIGNAL, '');
  await until('delivered', async () => (await stats()).delivered >= n);
  const elu = performance.eventLoopUtilization(elu0).utilization;
  const span = window.last - window.first;
  await until('recorded', async () => d.unrecorded === 0 && (await pending()) === 0);
  const cpu = process.cpuUsage(cpu0);
  const receiverUs = (receiverCpu() - receiver0) / n;
  loop.disable();
  const server1 = await serverCpu();
  await stopProfile();
  const s = await stats();
  return {
    cpuUs: (cpu.user + cpu.system) / n,
    userUs: cpu.user / n,
    server: server0 && server1 && { us: (server1.us - server0.us) / n, backends: server1.backends },
    receiverUs,
    rate: s.delivered / ((s.lastOkAt - s.firstAt) / 1000),
    connections: s.connections,
    loopMaxMs: loop.max / 1e6,
    loopP99Ms: loop.percentile(99) / 1e6,
    elu,
    belowFull: window.belowMs / span,
    empty: window.emptyMs / span,
    checkpoints:
      ckpt && ckpt0
        ? `${ckpt.runs - ckpt0.runs} WAL checkpoints off the event loop, ${(ckpt.ms - ckpt0.ms).toFixed(0)} ms in all, ` +
          `longest ${ckpt.maxMs.toFixed(0)} ms, WAL at most ${ckpt.maxFrames} pages`
        : undefined,
  };
}

/** The same bodies by raw undici, as the bench's ceiling. */
async function rawBurst(events: Array<{ id: string; body: string }>, profile?: string): Promise<Burst> {
  await reset();
  const stopProfile = await startProfile(profile);
  const receiver0 = receiverCpu();
  const cpu0 = process.cpuUsage();
  const pool = new Pool(origin, { connections: IN_FLIGHT });
  await inParallel(events.length, IN_FLIGHT, async (i) => {
    const e = events[i]!;
    await rawDelivery(pool, SECRET, e.id, e.body);
  });
  await pool.close();
  const cpu = process.cpuUsage(cpu0);
  const receiverUs = (receiverCpu() - receiver0) / events.length;
  await stopProfile();
  const s = await stats();
  return {
    cpuUs: (cpu.user + cpu.system) / events.length,
    userUs: cpu.user / events.length,
    receiverUs,
    rate: s.delivered / ((s.lastOkAt - s.firstAt) / 1000),
    connections: s.connections,
  };
}

try {
  if (WARM > 0) {
    const warm = await insertEvents(WARM);
    signals.deliver(WAKE_SIGNAL, '');
    await until('warm-up', async () => (await pending()) === 0);
    await rawBurst(warm);
  }
  for (let r = 1; r <= ROUNDS; r++) {
    const profile = r === ROUNDS ? process.env.PROFILE : undefined;
    const disp = await dispatcherBurst(N, profile);
    const bodies = await store.db
      .selectFrom('webhook_events')
      .select(['event_id as id', 'body'])
      .orderBy('created_at', 'desc')
      .limit(N)
      .execute();
    const ref = await rawBurst(bodies, r === ROUNDS ? process.env.PROFILE_RAW : undefined);
    console.log(
      `round ${r} ${process.env.DB ?? 'sqlite'}: dispatcher ${disp.cpuUs.toFixed(0)} µs CPU/delivery (user ${disp.userUs.toFixed(0)}), ${disp.rate.toFixed(0)}/s ` +
        `(${disp.connections} connections); raw undici ${ref.cpuUs.toFixed(0)} µs (user ${ref.userUs.toFixed(0)}), ${ref.rate.toFixed(0)}/s; ` +
        `rate ${((100 * disp.rate) / ref.rate).toFixed(0)} %, CPU ${((100 * ref.cpuUs) / disp.cpuUs).toFixed(0)} %` +
        `; event loop delay max ${disp.loopMaxMs!.toFixed(0)} ms, p99 ${disp.loopP99Ms!.toFixed(0)}` +
        `; loop busy ${(100 * disp.elu!).toFixed(0)} %, window below ${IN_FLIGHT} ${(100 * disp.belowFull!).toFixed(0)} %, empty ${(100 * disp.empty!).toFixed(1)} %` +
        (disp.checkpoints ? `; ${disp.checkpoints}` : '') +
        (disp.server
          ? `; server ${disp.server.us.toFixed(1)} µs CPU/delivery (${disp.server.backends} backends)`
          : '') +
        `; receiver ${disp.receiverUs.toFixed(1)} µs CPU/delivery (raw undici's ${ref.receiverUs.toFixed(1)})` +
        `; all three ${(disp.cpuUs + (disp.server?.us ?? 0) + disp.receiverUs).toFixed(0)} µs against raw undici's two ${(ref.cpuUs + ref.receiverUs).toFixed(0)}`,
    );
  }
  if (trace) fs.writeFileSync(process.env.TRACE!, trace.join('\n') + '\n');
  if (admin) console.log(await tableUpdates());
} finally {
  await d.stop();
  await sender.close();
  await admin?.end();
  await store.close();
  await rc.close();
  await receiver.stop();
  if (process.env.DB === 'postgres') await dropPgDatabase(url);
  fs.rmSync(dir, { recursive: true, force: true });
}
