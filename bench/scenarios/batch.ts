/**
 * Scenario "batch": 1,000 jobs submitted as one POST /api/v1/jobs/batch against 1,000 single
 * submits with 16 in flight (bench-noop, no media), on SQLite and on PostgreSQL, with and without
 * an Idempotency-Key (the batch's KEY:INDEX per item; a unique key per single submit). The API
 * alone is measured (WORKER_CONCURRENCY=0). Target: the batch at least 5× the singles' jobs/s.
 */
import { randomUUID } from 'node:crypto';
import {
  fmt,
  freshStore,
  httpClient,
  inParallel,
  log,
  median,
  NOOP_BODY,
  NOOP_PATH,
  raw,
  settings,
  setScenario,
  startService,
  stopAll,
  type Child,
  type Db,
  type Row,
} from '../lib.js';

const N = 1000;
const IN_FLIGHT = 16;

export async function batchScenario(): Promise<Row[]> {
  setScenario('batch');
  const rows: Row[] = [];
  const results: Record<string, { singles: number[]; batch: number[] }> = {};
  const item = JSON.parse(NOOP_BODY) as Record<string, unknown>;
  const batchBody = JSON.stringify({ jobs: Array.from({ length: N }, () => item) });

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
      const c = httpClient(service.base, store.key, IN_FLIGHT);
      for (const keyed of [false, true]) {
        const name = `${db}-${keyed ? 'key' : 'nokey'}`;
        results[name] = { singles: [], batch: [] };
        // Warm-up: a few of each.
        await inParallel(50, IN_FLIGHT, async () => {
          await c.call('POST', NOOP_PATH, NOOP_BODY);
        });
        await c.call('POST', '/api/v1/jobs/batch', batchBody);
        for (let round = 0; round < settings.rounds; round++) {
          let t = performance.now();
          let bad = 0;
          await inParallel(N, IN_FLIGHT, async () => {
            const r = await c.call('POST', NOOP_PATH, NOOP_BODY, keyed ? { 'idempotency-key': randomUUID() } : {});
            if (r.status !== 200) bad++;
          });
          const singles = N / ((performance.now() - t) / 1000);
          t = performance.now();
          const r = await c.call<{ data: { items: Array<{ status: number }> } }>(
            'POST',
            '/api/v1/jobs/batch',
            batchBody,
            keyed ? { 'idempotency-key': randomUUID() } : {},
          );
          const batch = N / ((performance.now() - t) / 1000);
          if (bad > 0 || r.status !== 200 || r.json.data.items.some((i) => i.status !== 200))
            throw new Error(`batch ${name}: ${bad} single submits failed, batch answered ${r.status}`);
          log(`  round ${round + 1} ${name}: singles ${fmt.int(singles)} jobs/s, batch ${fmt.int(batch)} jobs/s`);
          results[name].singles.push(singles);
          results[name].batch.push(batch);
        }
      }
      await c.close();
    } finally {
      await stopAll([svc]);
      await store.dispose();
    }
  }
  raw.batch = results;
  for (const [name, r] of Object.entries(results)) {
    const [db, key] = name.split('-');
    const singles = median(r.singles);
    const batch = median(r.batch);
    rows.push({
      scenario: 'batch',
      case: `${db === 'sqlite' ? 'SQLite' : 'PostgreSQL'}, ${N} jobs, ${key === 'key' ? 'with' : 'no'} Idempotency-Key`,
      value: `one batch: ${fmt.int(batch)} jobs/s`,
      reference: `${N} single submits, ${IN_FLIGHT} in flight: ${fmt.int(singles)} jobs/s`,
      target: `≥ 5×: ${(batch / singles).toFixed(1)}×`,
      ok: batch >= 5 * singles,
    });
  }
  return rows;
}
