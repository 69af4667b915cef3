/**
 * Crash under load: four clients submit continuously (each submit with its own Idempotency-Key,
 * retried with the same key until answered) to a real `media-jobs serve` child process while it
 * is SIGKILLed three times at random moments and restarted on the same DATA_DIR / database.
 * Jobs take a little while (their media arrives slowly) so some are always mid-flight.
 *
 * Afterwards: every submit answered with code 0 exists (and no job exists that no client was
 * told about), every job is terminal, an acknowledged cancel held, every completed job's result
 * downloads, and every subscribed terminal event reached the receiver at least once, with one
 * event id per job (duplicate deliveries of that id across a crash are allowed and counted).
 *
 * Runs on SQLite, and on PostgreSQL when one is reachable (TEST_PG_URL).
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cli, spawnService, type ChildService } from '../helpers/child.js';
import { createTestDatabase } from '../helpers/db.js';
import { freePort, tempDir, waitFor } from '../helpers/service.js';
import {
  postgresReachable,
  PG_ADMIN_URL,
  prng,
  recordFigures,
  SEED,
  sleep,
  startHookReceiver,
  startSlowMedia,
  type HookReceiver,
  type SlowMedia,
} from './support.js';

const KILLS = Number(process.env.RELIABILITY_KILLS ?? 3);
const CLIENTS = 4;
const TERMINAL = ['completed', 'failed', 'cancelled'];

const pgUp = await postgresReachable();
if (!pgUp && process.env.REQUIRE_POSTGRES === 'true')
  throw new Error(`PostgreSQL is required (REQUIRE_POSTGRES=true) but ${PG_ADMIN_URL} is not reachable`);
if (!pgUp) console.log(`PostgreSQL not reachable at ${PG_ADMIN_URL}: the crash scenario runs on SQLite only.`);
const backends: Array<'sqlite' | 'postgres'> = pgUp ? ['sqlite', 'postgres'] : ['sqlite'];

const children: ChildService[] = [];
afterAll(async () => {
  for (const c of children) if (c.proc.exitCode === null && c.proc.signalCode === null) await c.kill9();
});

interface Acked {
  key: string;
  uuid: string;
  kind: 'ok' | 'fail' | 'cancel';
  events: string[];
  /** Attempts before an answer (more than 1: the connection died under the request). */
  tries: number;
  replayed: boolean;
  cancelAcked: boolean;
}

describe.each(backends)('crash under load on %s', (backend) => {
  let media: SlowMedia;
  let rx: HookReceiver;

  it(`${backend}: survives ${KILLS} SIGKILLs under load: nothing acknowledged is lost, every job ends, every subscribed webhook arrives`, async () => {
    media = await startSlowMedia();
    rx = await startHookReceiver('ok');
    const rnd = prng(SEED + (backend === 'sqlite' ? 1 : 2));
    const dataDir = tempDir(`mj-crash-${backend}-`);
    const env: Record<string, string> = {
      DATA_DIR: dataDir,
      ...(backend === 'postgres' ? { DATABASE_URL: await createTestDatabase() } : {}),
      JOB_LEASE: '2s',
      QUEUE_POLL_INTERVAL: '200ms',
      WORKER_CONCURRENCY: '4',
      WEBHOOK_TIMEOUT: '2s',
      WEBHOOK_RETRY_SCHEDULE: '0,300ms,1s,2s,3s',
      MAINTENANCE_INTERVAL: '1s',
      RATE_LIMIT_SUBMIT: '0',
      RATE_LIMIT_READ: '0',
      SHUTDOWN_GRACE: '2s',
    };
    const key = cli(['keys', 'create', '--owner', 'crash-load'], env).lastLine;
    expect(key).toMatch(/^mj_/);
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const start = async () => {
      const t0 = Date.now();
      const c = await spawnService(env, key, { port });
      children.push(c);
      restartMs.push(Date.now() - t0);
      return c;
    };
    const restartMs: number[] = [];
    let svc = await start();
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };

    // --- the clients ---------------------------------------------------------------------------
    const acked: Acked[] = [];
    const unexpected: string[] = [];
    let stop = false;
    let inDoubt = 0;
    let refused = 0;
    let dropped = 0;
    /** Set by the killer: the next client to send a submit fires the kill a few ms later. */
    let armed: (() => void) | undefined;
    let inDoubtReplayed = 0;
    let inDoubtCreated = 0;
    let cancelsSent = 0;
    let cancelsLost = 0;
    async function client(i: number): Promise<void> {
      const r = prng(SEED * 31 + i + (backend === 'sqlite' ? 0 : 1000));
      for (let n = 1; !stop; n++) {
        const idem = `crash-${backend}-${i}-${n}`;
        const roll = r();
        const kind: Acked['kind'] = roll < 0.1 ? 'fail' : roll < 0.2 ? 'cancel' : 'ok';
        const events = r() < 0.15 ? ['job.failed'] : ['job.completed', 'job.failed', 'job.cancelled'];
        const source =
          kind === 'fail'
            ? media.missing(idem)
            : media.slow(kind === 'cancel' ? 1500 : 50 + Math.floor(r() * 400), idem);
        const body = JSON.stringify({
          job_type: 'image-transform',
          model: 'lanczos3',
          input: { source, width: 64 },
          webhook:
            events.length === 3
              ? { url: rx.url(`/hook/${i}`), secret: `s-${i}` }
              : { url: rx.url(`/hook/${i}`), events },
        });
        let tries = 0;
        let answer: { uuid: string; replayed: boolean } | undefined;
        let doubted = false;
        while (!answer) {
          tries++;
          if (armed) {
            const fire = armed;
            armed = undefined;
            setTimeout(fire, r() * 25);
          }
          try {
            const res = await fetch(`${base}/api/v1/jobs/submit/image-transform`, {
              method: 'POST',
              headers: { ...headers, 'idempotency-key': idem },
              body,
              signal: AbortSignal.timeout(20_000),
            });
            const text = await res.text();
            if (res.status === 200) {
              answer = {
                uuid: JSON.parse(text).data.uuid,
                replayed: res.headers.get('idempotent-replayed') === 'true',
              };
            } else {
              unexpected.push(`submit ${idem}: HTTP ${res.status} ${text.slice(0, 200)}`);
              await sleep(200);
            }
          } catch (err) {
            // No answer (the process died under the request, or is down): retry with the same key.
            if ((err as { cause?: { code?: string } }).cause?.code === 'ECONNREFUSED') refused++;
            else dropped++;
            if (!doubted) inDoubt++;
            doubted = true;
            await sleep(100 + r() * 150);
          }
        }
        if (doubted) {
          if (answer.replayed) inDoubtReplayed++;
          else inDoubtCreated++;
        }
        const a: Acked = {
          key: idem,
          uuid: answer.uuid,
          kind,
          events,
          tries,
          replayed: answer.replayed,
          cancelAcked: false,
        };
        acked.push(a);
        if (kind === 'cancel') {
          await sleep(r() * 300);
          cancelsSent++;
          try {
            const res = await fetch(`${base}/api/v1/jobs/${a.uuid}/cancel`, {
              method: 'POST',
              headers: { authorization: headers.authorization },
              signal: AbortSignal.timeout(20_000),
            });
            await res.text();
            if (res.status === 200) a.cancelAcked = true;
            else if (res.status !== 409) unexpected.push(`cancel ${a.uuid}: HTTP ${res.status}`);
          } catch {
            cancelsLost++;
          }
        }
        await sleep(150 + r() * 300);
      }
    }
    const t0 = Date.now();
    const loops = Array.from({ length: CLIENTS }, (_, i) => client(i));

    // --- the crashes ---------------------------------------------------------------------------
    const processingAtKill: number[] = [];
    const ackedAtKill: number[] = [];
    const killedAt: number[] = [];
    for (let k = 0; k < KILLS; k++) {
      await sleep(2_000 + rnd() * 3_000);
      try {
        const p = await fetch(`${base}/api/v1/jobs?status=processing&limit=100`, {
          headers: { authorization: headers.authorization },
        });
        processingAtKill.push((await p.json()).data.jobs.length);
      } catch {
        processingAtKill.push(-1);
      }
      ackedAtKill.push(acked.length);
      // Kill a few milliseconds after some client sends a submit: sometimes mid-request.
      await new Promise<void>((resolve) => (armed = resolve));
      killedAt.push(Date.now());
      await svc.kill9();
      await sleep(rnd() * 500);
      svc = await start();
    }
    await sleep(3_000);
    stop = true;
    await Promise.all(loops);
    const loadMs = Date.now() - t0;

    // --- afterwards ----------------------------------------------------------------------------
    const call = svc.call;
    const tDrain = Date.now();
    await waitFor(
      async () => {
        const q = (await call('GET', '/api/v1/jobs?status=queued&limit=1')).body.data?.jobs;
        const p = (await call('GET', '/api/v1/jobs?status=processing&limit=1')).body.data?.jobs;
        return q?.length === 0 && p?.length === 0;
      },
      'every job to reach a terminal state',
      240_000,
    );
    const drainMs = Date.now() - tDrain;

    // Every job the service has, by listing (cursor pages).
    const all = new Map<string, any>();
    let cursor: string | null = null;
    do {
      const page: any = (await call('GET', `/api/v1/jobs?limit=100${cursor ? `&cursor=${cursor}` : ''}`)).body.data;
      for (const j of page.jobs) all.set(j.uuid, j);
      cursor = page.next_cursor;
    } while (cursor);

    const ackedUuids = new Set(acked.map((a) => a.uuid));
    const lost = acked.filter((a) => !all.has(a.uuid)).map((a) => a.key);
    const phantom = [...all.keys()].filter((u) => !ackedUuids.has(u));
    const oneJobPerKey = new Set(acked.map((a) => a.key)).size === acked.length && ackedUuids.size === acked.length;

    const statuses: Record<string, number> = {};
    const errorTypes: Record<string, number> = {};
    const notTerminal: string[] = [];
    const cancelBroken: string[] = [];
    for (const a of acked) {
      const j = all.get(a.uuid);
      if (!j) continue;
      statuses[j.status] = (statuses[j.status] ?? 0) + 1;
      if (j.status === 'failed') errorTypes[j.error_type] = (errorTypes[j.error_type] ?? 0) + 1;
      if (!TERMINAL.includes(j.status)) notTerminal.push(`${a.uuid}: ${j.status}`);
      if (a.cancelAcked && j.status !== 'cancelled')
        cancelBroken.push(`${a.uuid}: cancel answered 200, job is ${j.status}`);
      if (a.kind === 'fail' && j.status === 'completed') cancelBroken.push(`${a.uuid}: missing media, yet completed`);
    }

    // Results of completed jobs download, and how many completed jobs ran more than once.
    const completed = acked.filter((a) => all.get(a.uuid)?.status === 'completed');
    const brokenResults: string[] = [];
    for (const a of completed) {
      const r = await call('GET', `/api/v1/jobs/${a.uuid}/result`);
      if (r.status !== 200) {
        brokenResults.push(`${a.uuid}: result HTTP ${r.status} ${r.text.slice(0, 120)}`);
        continue;
      }
      const dl = await fetch(r.body.data.url);
      const bytes = Buffer.from(await dl.arrayBuffer());
      if (dl.status !== 200 || bytes.length !== r.body.data.size_bytes)
        brokenResults.push(`${a.uuid}: download HTTP ${dl.status}, ${bytes.length} bytes`);
    }
    const resultFiles = fs.existsSync(path.join(dataDir, 'results'))
      ? fs.readdirSync(path.join(dataDir, 'results'))
      : [];
    const rerun = new Set(resultFiles.filter((f) => /\.[2-9]\.\w+$/.test(f)).map((f) => f.slice(0, 36))).size;

    // Webhooks: every subscribed terminal event arrives; one event id per job; never an unsubscribed one.
    const expectEvent = (a: Acked) => a.events.includes(`job.${all.get(a.uuid)?.status}`);
    const expecting = acked.filter(expectEvent);
    const tHooks = Date.now();
    await waitFor(
      () => {
        const got = new Set(rx.deliveries.map((d) => d.jobUuid));
        return expecting.every((a) => got.has(a.uuid));
      },
      'every subscribed webhook to arrive',
      240_000,
    ).catch(() => undefined);
    const hooksWaitMs = Date.now() - tHooks;
    // The outbox converges (first, so a late duplicate, sent again after a dead dispatcher's lease ran
    // out, is counted below): every event with a delivery on record ends "delivered" (not stuck pending).
    const tOutbox = Date.now();
    const pendingOutbox = await waitFor(
      async () => {
        const pending: string[] = [];
        for (const a of expecting) {
          const d = (await call('GET', `/api/v1/jobs/${a.uuid}/webhook-deliveries`)).body.data?.deliveries ?? [];
          if (d.length !== 1 || d[0].state !== 'delivered')
            pending.push(`${a.uuid}: ${JSON.stringify(d.map((x: any) => x.state))}`);
        }
        return pending.length === 0 ? [] : undefined;
      },
      'the outbox to record every delivery',
      120_000,
    ).catch(() => ['(still pending after 120 s)']);
    const outboxMs = Date.now() - tOutbox;

    const byJob = new Map<string, typeof rx.deliveries>();
    for (const d of rx.deliveries) byJob.set(d.jobUuid, [...(byJob.get(d.jobUuid) ?? []), d]);
    const webhookProblems: string[] = [];
    for (const a of acked) {
      const j = all.get(a.uuid);
      const ds = byJob.get(a.uuid) ?? [];
      if (!j) continue;
      if (!expectEvent(a)) {
        if (ds.length > 0)
          webhookProblems.push(`${a.uuid}: ${ds.length} deliveries of an unsubscribed event (${j.status})`);
        continue;
      }
      if (ds.length === 0) webhookProblems.push(`${a.uuid}: ${j.status}, subscribed, never delivered`);
      const ids = new Set(ds.map((d) => d.eventId));
      if (ids.size > 1) webhookProblems.push(`${a.uuid}: ${ids.size} different event ids`);
      for (const d of ds) {
        if (d.eventType !== `job.${j.status}` || d.jobStatus !== j.status)
          webhookProblems.push(`${a.uuid}: delivered ${d.eventType}/${d.jobStatus}, job is ${j.status}`);
      }
    }
    const received = rx.deliveries.length;
    const distinctEvents = new Set(rx.deliveries.map((d) => d.eventId)).size;
    const perEvent = new Map<string, number>();
    for (const d of rx.deliveries) perEvent.set(d.eventId, (perEvent.get(d.eventId) ?? 0) + 1);
    // Each duplicate: how long before the nearest kill the first copy arrived, and how long after it the second.
    const duplicateTimings = [...perEvent]
      .filter(([, n]) => n > 1)
      .map(([id]) => {
        const ds = rx.deliveries.filter((d) => d.eventId === id).map((d) => d.at);
        const kill = killedAt.filter((k) => k >= ds[0]! - 1).sort((x, y) => x - y)[0];
        return kill === undefined
          ? `first copy after the last kill (${id})`
          : `first copy ${kill - ds[0]!} ms before a kill, again ${Math.round((ds[1]! - kill) / 100) / 10} s after it`;
      });

    recordFigures(`crash under load (${backend})`, {
      clients: CLIENTS,
      'SIGKILLs survived': KILLS,
      'restart to ready, ms (each start)': restartMs,
      'load phase, s': Math.round(loadMs / 100) / 10,
      'jobs processing just before each kill': processingAtKill,
      'submits acknowledged at each kill': ackedAtKill,
      'submits acknowledged (code 0)': acked.length,
      'submits in doubt (no answer, retried with the same key)': inDoubt,
      'requests cut by a kill (connection dropped) / refused while down': `${dropped} / ${refused}`,
      '… answered by an idempotent replay after the restart': inDoubtReplayed,
      '… created on the retry (the first never committed)': inDoubtCreated,
      'jobs in the database': all.size,
      'acknowledged jobs lost': lost.length,
      'jobs nobody was told about': phantom.length,
      'unexpected answers (not 200/409)': unexpected.length,
      'final statuses': statuses,
      'failed jobs by error_type': errorTypes,
      'cancels sent / answered 200 / lost in a crash': `${cancelsSent} / ${acked.filter((a) => a.cancelAcked).length} / ${cancelsLost}`,
      'completed jobs that ran more than once (lease recovered)': rerun,
      'completed results downloaded': `${completed.length - brokenResults.length} of ${completed.length}`,
      'drain after the last restart, s': Math.round(drainMs / 100) / 10,
      'webhook events expected': expecting.length,
      'webhook events delivered (distinct ids)': distinctEvents,
      'webhook deliveries received': received,
      'duplicate deliveries (same event id again)': received - distinctEvents,
      'most deliveries of one event': Math.max(0, ...perEvent.values()),
      'duplicates, timing': duplicateTimings,
      'wait for the last webhook after drain, s': Math.round(hooksWaitMs / 100) / 10,
      'wait until the outbox shows every event delivered, s': Math.round(outboxMs / 100) / 10,
    });

    expect(unexpected).toEqual([]);
    expect(lost).toEqual([]);
    expect(phantom).toEqual([]);
    expect(oneJobPerKey).toBe(true);
    expect(notTerminal).toEqual([]);
    expect(cancelBroken).toEqual([]);
    expect(brokenResults).toEqual([]);
    expect(webhookProblems).toEqual([]);
    expect(pendingOutbox).toEqual([]);
    expect(acked.length).toBeGreaterThan(20);
    expect(await svc.term()).toBe(0);
    await rx.close();
    await media.close();
  });
});
