import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleepJobType } from '../helpers/job-types.js';
import { startService, type TestService } from '../helpers/service.js';

/**
 * A full disk on SQLite, for real: `PRAGMA max_page_count` makes SQLite itself answer SQLITE_FULL
 * once the file would have to grow. Submits answer a 503 envelope (never a 500), nothing
 * acknowledged is lost or corrupted, and everything works again once there is room.
 */
describe.skipIf(process.env.TEST_DB === 'postgres')('SQLite disk full', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startService(
      { WORKER_CONCURRENCY: '0', RATE_LIMIT_SUBMIT: '0', RATE_LIMIT_READ: '0' },
      { jobTypes: [sleepJobType()] },
    );
  });
  afterAll(() => svc?.stop());

  const submit = () =>
    svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
      body: { job_type: 'test-sleep', model: 'v1', input: { ms: 1 } },
    });

  it('answers 503 while the database cannot grow, keeps acknowledged jobs, and recovers', async () => {
    if (svc.app.store.dialect !== 'sqlite') return;
    const db = svc.app.store.db;
    const acknowledged: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await submit();
      expect(r.status).toBe(200);
      acknowledged.push(r.body.data.uuid);
    }
    const pages = (await sql<{ page_count: number }>`PRAGMA page_count`.execute(db)).rows[0]!.page_count;
    await sql.raw(`PRAGMA max_page_count = ${pages}`).execute(db);

    const answers: number[] = [];
    for (let i = 0; i < 500 && !answers.includes(503); i++) {
      const r = await submit();
      answers.push(r.status);
      if (r.status === 200) acknowledged.push(r.body.data.uuid);
      else {
        expect(r.status).toBe(503);
        expect(r.body).toMatchObject({ code: -1, data: {} });
        expect(r.body.message).toMatch(/unavailable/);
        expect(r.headers.get('retry-after')).toBeTruthy();
      }
    }
    expect(answers).toContain(503);
    expect(answers).not.toContain(500);
    // Reads still work while writes cannot.
    expect((await svc.call('GET', `/api/v1/jobs/${acknowledged[0]}/status`)).status).toBe(200);

    await sql.raw('PRAGMA max_page_count = 1073741823').execute(db);
    const after = await submit();
    expect(after.status).toBe(200);
    acknowledged.push(after.body.data.uuid);
    for (const uuid of acknowledged) {
      const r = await svc.call('GET', `/api/v1/jobs/${uuid}/status`);
      expect(r.status).toBe(200);
      expect(r.body.data.status).toBe('queued');
    }
    const check = (await sql<{ integrity_check: string }>`PRAGMA integrity_check`.execute(db)).rows[0] as {
      integrity_check: string;
    };
    expect(check.integrity_check).toBe('ok');
  });
});
