/**
 * Scenario 1: GET /api/v1/jobs/{uuid}/status of a completed job on SQLite, 64 connections, against
 * bare Fastify answering an envelope of the same size (the framework's ceiling). Request logs off
 * (LOG_LEVEL=warn) as the headline; the same with request logs on (info) for comparison.
 */
import {
  completedNoopStatus,
  authHeaders,
  checkLoad,
  describeLoad,
  fmt,
  freePort,
  freshStore,
  load,
  log,
  median,
  raw,
  settings,
  setScenario,
  spawnChild,
  startService,
  stopAll,
  type Child,
  type LoadResult,
  type Row,
} from '../lib.js';

export const TARGET_SHARE = 0.6;

export async function statusScenario(): Promise<Row[]> {
  setScenario('status');
  const store = await freshStore('sqlite');
  let svc: Child | undefined;
  let bare: Child | undefined;
  try {
    const service = await startService(store, { role: 'all', env: { WORKER_CONCURRENCY: '1' } });
    svc = service;
    const { path: statusPath, text } = await completedNoopStatus(service.base, store.key);

    const barePort = await freePort();
    bare = await spawnChild(
      'bare-fastify',
      'bare.ts',
      [],
      { PORT: String(barePort), BARE_BODY: text },
      { track: true },
    );
    const svcUrl = `${service.base}${statusPath}`;
    const bareUrl = `http://127.0.0.1:${barePort}${statusPath}`;
    const headers = authHeaders(store.key);

    const runs = async (
      url: string,
      label: string,
      h: Record<string, string>,
      pid: number,
      duration = settings.duration,
    ): Promise<LoadResult> => {
      const r = await load({ url, headers: h, duration, cpuOf: pid });
      checkLoad(label, r);
      log(`  ${label}: ${describeLoad(r)}`);
      return r;
    };
    // Warm-up (JIT, SQLite page cache), not measured.
    await load({ url: svcUrl, headers, duration: 2 });
    await load({ url: bareUrl, duration: 2 });
    const warn: LoadResult[] = [];
    const ceiling: LoadResult[] = [];
    for (let i = 0; i < settings.rounds; i++) {
      warn.push(await runs(svcUrl, `round ${i + 1} service (warn logs)`, headers, service.pid));
      ceiling.push(await runs(bareUrl, `round ${i + 1} bare Fastify`, {}, bare.pid));
    }
    await svc.stop();

    // The same service with one JSON request log line per request (LOG_LEVEL=info, to a file).
    const infoSvc = await startService(store, {
      role: 'all',
      env: { WORKER_CONCURRENCY: '1', LOG_LEVEL: 'info' },
      name: 'service-all-info-logs',
    });
    svc = infoSvc;
    const infoUrl = `${infoSvc.base}${statusPath}`;
    await load({ url: infoUrl, headers, duration: 2 });
    const info: LoadResult[] = [];
    for (let i = 0; i < settings.rounds; i++)
      info.push(
        await runs(infoUrl, `round ${i + 1} service (info logs)`, headers, infoSvc.pid, settings.shortDuration),
      );

    raw.status = { bodyBytes: text.length, warn, info, ceiling };
    const m = (rs: LoadResult[]) => ({
      rps: median(rs.map((r) => r.rps)),
      p50: median(rs.map((r) => r.p50)),
      p99: median(rs.map((r) => r.p99)),
      cpuUs: median(rs.map((r) => r.cpuUs ?? NaN)),
    });
    const w = m(warn);
    const b = m(ceiling);
    const n = m(info);
    const cell = (x: ReturnType<typeof m>) =>
      `${fmt.int(x.rps)} req/s, p50 ${fmt.ms(x.p50)}, p99 ${fmt.ms(x.p99)}${Number.isNaN(x.cpuUs) ? '' : `, ${Math.round(x.cpuUs)} µs CPU/req`}`;
    const ref = `bare Fastify: ${cell(b)}`;
    return [
      {
        scenario: '1 status',
        case: `SQLite, ${settings.connections} conns, LOG_LEVEL=warn (${text.length} B envelope)`,
        value: cell(w),
        reference: ref,
        target: `≥ ${fmt.pct(TARGET_SHARE)} of ceiling: ${fmt.pct(w.rps / b.rps)}`,
        ok: w.rps / b.rps >= TARGET_SHARE,
      },
      {
        scenario: '1 status',
        case: `SQLite, ${settings.connections} conns, LOG_LEVEL=info (request logs on)`,
        value: cell(n),
        reference: ref,
        target: `(info) ${fmt.pct(n.rps / b.rps)} of ceiling`,
        detail: true,
      },
    ];
  } finally {
    await stopAll([svc, bare]);
    await store.dispose();
  }
}
