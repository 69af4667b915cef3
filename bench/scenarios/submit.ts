/**
 * Scenario 2: POST /api/v1/jobs/submit/bench-noop (no media, so no DNS), without and with a unique
 * Idempotency-Key per request, on SQLite and on PostgreSQL. WORKER_CONCURRENCY=0 and role api: only
 * the API is measured. Reference: bare Fastify parsing the same JSON body and answering an envelope
 * of the same size as the service's submit answer (the framework's ceiling).
 */
import { randomUUID } from 'node:crypto';
import {
  authHeaders,
  checkLoad,
  describeLoad,
  fmt,
  freePort,
  freshStore,
  httpClient,
  load,
  log,
  median,
  NOOP_BODY,
  NOOP_PATH,
  raw,
  settings,
  setScenario,
  spawnChild,
  startService,
  stopAll,
  type Child,
  type Db,
  type LoadResult,
  type Row,
} from '../lib.js';

const summary = (rs: LoadResult[]) => ({
  rps: median(rs.map((r) => r.rps)),
  p50: median(rs.map((r) => r.p50)),
  p99: median(rs.map((r) => r.p99)),
});
const cell = (x: ReturnType<typeof summary>) => `${fmt.int(x.rps)} req/s, p50 ${fmt.ms(x.p50)}, p99 ${fmt.ms(x.p99)}`;

export async function submitScenario(): Promise<Row[]> {
  setScenario('submit');
  const rows: Row[] = [];
  const results: Record<string, LoadResult[]> = {};
  let sampleAnswer = '';

  for (const db of ['sqlite', 'postgres'] as Db[]) {
    const store = await freshStore(db);
    let svc: Child | undefined;
    try {
      const service = await startService(store, {
        role: 'api',
        env: { WORKER_CONCURRENCY: '0' },
        name: `service-api-${db}`,
      });
      svc = service;
      const c = httpClient(service.base, store.key, 1);
      sampleAnswer = JSON.stringify((await c.call('POST', NOOP_PATH, NOOP_BODY)).json);
      await c.close();
      const url = `${service.base}${NOOP_PATH}`;
      const headers = authHeaders(store.key, true);
      const variants = {
        plain: () => load({ url, method: 'POST', headers, body: NOOP_BODY, duration: settings.shortDuration }),
        idempotent: () =>
          load({
            url,
            method: 'POST',
            headers,
            body: NOOP_BODY,
            duration: settings.shortDuration,
            perRequestHeaders: () => ({ 'idempotency-key': randomUUID() }),
          }),
      };
      await load({ url, method: 'POST', headers, body: NOOP_BODY, duration: 2 });
      for (const v of Object.keys(variants) as Array<keyof typeof variants>) results[`${db}-${v}`] = [];
      for (let i = 0; i < settings.rounds; i++) {
        for (const [v, run] of Object.entries(variants)) {
          const r = await run();
          checkLoad(`submit ${db} ${v}`, r);
          log(`  round ${i + 1} ${db} ${v}: ${describeLoad(r)}`);
          results[`${db}-${v}`]!.push(r);
        }
      }
    } finally {
      await stopAll([svc]);
      await store.dispose();
    }
  }

  // The ceiling: bare Fastify, same body in, same-size envelope out.
  let bare: Child | undefined;
  try {
    const port = await freePort();
    bare = await spawnChild(
      'bare-fastify',
      'bare.ts',
      [],
      { PORT: String(port), BARE_SUBMIT_BODY: sampleAnswer },
      { track: true },
    );
    const url = `http://127.0.0.1:${port}${NOOP_PATH}`;
    const headers = { 'content-type': 'application/json' };
    await load({ url, method: 'POST', headers, body: NOOP_BODY, duration: 2 });
    results.bare = [];
    for (let i = 0; i < settings.rounds; i++) {
      const r = await load({ url, method: 'POST', headers, body: NOOP_BODY, duration: settings.shortDuration });
      checkLoad('submit bare', r);
      log(`  round ${i + 1} bare Fastify POST: ${describeLoad(r)}`);
      results.bare.push(r);
    }
  } finally {
    await stopAll([bare]);
  }

  raw.submit = results;
  const b = summary(results.bare);
  for (const db of ['sqlite', 'postgres'] as Db[]) {
    const plain = summary(results[`${db}-plain`]!);
    const idem = summary(results[`${db}-idempotent`]!);
    const name = db === 'sqlite' ? 'SQLite' : 'PostgreSQL';
    rows.push({
      scenario: '2 submit',
      case: `${name}, no Idempotency-Key, ${settings.connections} conns`,
      value: cell(plain),
      reference: `bare Fastify POST: ${cell(b)}`,
      target: `${fmt.pct(plain.rps / b.rps)} of ceiling`,
    });
    rows.push({
      scenario: '2 submit',
      case: `${name}, unique Idempotency-Key, ${settings.connections} conns`,
      value: cell(idem),
      reference: `without key: ${fmt.int(plain.rps)} req/s`,
      target: `${fmt.pct(idem.rps / plain.rps)} of no-key rate`,
    });
  }
  return rows;
}
