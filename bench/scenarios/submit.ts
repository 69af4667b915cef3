/**
 * Scenario 2: POST /api/v1/jobs/submit/bench-noop (no media, so no DNS), without and with a unique
 * Idempotency-Key per request, on SQLite and on PostgreSQL, BENCH_SUBMIT_CONNECTIONS (16)
 * connections. WORKER_CONCURRENCY=0 and role api: only the API is measured. The ceiling is a
 * durable submit with nothing else: bare Fastify parsing the same body and inserting one row per
 * request into the same kind of database (bench/bare.ts with BARE_DB), measured in the same rounds,
 * alternating with the service; bare Fastify without a database is a secondary row.
 */
import { randomUUID } from 'node:crypto';
import path from 'node:path';
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
  type LoadOptions,
  type LoadResult,
  type Row,
} from '../lib.js';

export const TARGET_SHARE = 0.5;

const summary = (rs: LoadResult[]) => ({
  rps: median(rs.map((r) => r.rps)),
  p50: median(rs.map((r) => r.p50)),
  p99: median(rs.map((r) => r.p99)),
  cpuUs: median(rs.map((r) => r.cpuUs ?? NaN)),
});
const cell = (x: ReturnType<typeof summary>) =>
  `${fmt.int(x.rps)} req/s, p50 ${fmt.ms(x.p50)}, p99 ${fmt.ms(x.p99)}${Number.isNaN(x.cpuUs) ? '' : `, ${Math.round(x.cpuUs)} µs CPU/req`}`;

async function startBare(name: string, env: Record<string, string>): Promise<{ child: Child; url: string }> {
  const port = await freePort();
  const child = await spawnChild(name, 'bare.ts', [], { PORT: String(port), ...env }, { track: true });
  return { child, url: `http://127.0.0.1:${port}${NOOP_PATH}` };
}

export async function submitScenario(): Promise<Row[]> {
  setScenario('submit');
  const rows: Row[] = [];
  const results: Record<string, LoadResult[]> = {};
  const connections = settings.submitConnections;
  const run = async (label: string, key: string, o: LoadOptions) => {
    const r = await load({ method: 'POST', body: NOOP_BODY, duration: settings.shortDuration, connections, ...o });
    checkLoad(`submit ${label}`, r);
    log(`  ${label}: ${describeLoad(r)}`);
    (results[key] ??= []).push(r);
  };
  let sampleAnswer = '';

  for (const db of ['sqlite', 'postgres'] as Db[]) {
    const store = await freshStore(db);
    let svc: Child | undefined;
    let bare: Child | undefined;
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
      // The durable ceiling writes to its own table in a database of the same kind.
      const bareDb = db === 'sqlite' ? `sqlite:${path.join(store.dataDir, 'bare.sqlite')}` : store.url;
      const durable = await startBare(`bare-fastify-${db}`, { BARE_DB: bareDb, BARE_SUBMIT_BODY: sampleAnswer });
      bare = durable.child;
      const url = `${service.base}${NOOP_PATH}`;
      const headers = authHeaders(store.key, true);
      const bareHeaders = { 'content-type': 'application/json' };
      // Warm-up (JIT, page cache), not measured.
      await load({ url, method: 'POST', headers, body: NOOP_BODY, duration: 2, connections });
      await load({ url: durable.url, method: 'POST', headers: bareHeaders, body: NOOP_BODY, duration: 2, connections });
      for (let i = 0; i < settings.rounds; i++) {
        await run(`round ${i + 1} ${db} no key`, `${db}-plain`, { url, headers, cpuOf: service.pid });
        await run(`round ${i + 1} ${db} ceiling (bare Fastify + INSERT)`, `${db}-ceiling`, {
          url: durable.url,
          headers: bareHeaders,
          cpuOf: durable.child.pid,
        });
        await run(`round ${i + 1} ${db} unique key`, `${db}-idempotent`, {
          url,
          headers,
          cpuOf: service.pid,
          perRequestHeaders: () => ({ 'idempotency-key': randomUUID() }),
        });
      }
    } finally {
      await stopAll([svc, bare]);
      await store.dispose();
    }
  }

  // The framework alone: bare Fastify, same body in, same-size envelope out, no database.
  let bare: Child | undefined;
  try {
    const framework = await startBare('bare-fastify', { BARE_SUBMIT_BODY: sampleAnswer });
    bare = framework.child;
    const headers = { 'content-type': 'application/json' };
    await load({ url: framework.url, method: 'POST', headers, body: NOOP_BODY, duration: 2, connections });
    for (let i = 0; i < settings.rounds; i++)
      await run(`round ${i + 1} bare Fastify POST, no database`, 'bare', {
        url: framework.url,
        headers,
        cpuOf: framework.child.pid,
      });
  } finally {
    await stopAll([bare]);
  }

  raw.submit = results;
  const framework = summary(results.bare!);
  for (const db of ['sqlite', 'postgres'] as Db[]) {
    const plain = summary(results[`${db}-plain`]!);
    const idem = summary(results[`${db}-idempotent`]!);
    const ceiling = summary(results[`${db}-ceiling`]!);
    const name = db === 'sqlite' ? 'SQLite' : 'PostgreSQL';
    const ref = `bare Fastify + one INSERT: ${cell(ceiling)}`;
    rows.push({
      scenario: '2 submit',
      case: `${name}, no Idempotency-Key, ${connections} conns`,
      value: cell(plain),
      reference: ref,
      target:
        db === 'sqlite'
          ? `≥ ${fmt.pct(TARGET_SHARE)} of ceiling: ${fmt.pct(plain.rps / ceiling.rps)}`
          : `${fmt.pct(plain.rps / ceiling.rps)} of ceiling`,
      ok: db === 'sqlite' ? plain.rps / ceiling.rps >= TARGET_SHARE : undefined,
    });
    rows.push({
      scenario: '2 submit',
      case: `${name}, unique Idempotency-Key, ${connections} conns`,
      value: cell(idem),
      reference: ref,
      target: `${fmt.pct(idem.rps / ceiling.rps)} of ceiling (${fmt.pct(idem.rps / plain.rps)} of no key)`,
    });
  }
  rows.push({
    scenario: '2 submit',
    case: `bare Fastify POST without a database, ${connections} conns`,
    value: cell(framework),
    target: `SQLite no key: ${fmt.pct(summary(results['sqlite-plain']!).rps / framework.rps)} of it`,
    detail: true,
  });
  return rows;
}
