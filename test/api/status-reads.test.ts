import path from 'node:path';
import SQLite from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleepJobType } from '../helpers/job-types.js';
import { TEST_DB } from '../helpers/db.js';
import { startService, waitTerminal, type TestService } from '../helpers/service.js';
import { sqliteHandle } from '../../src/store/db.js';

/**
 * On SQLite a status is answered from memory while the database is unchanged
 * (store/unchanged-reads.ts): every write, by this process or any other connection, must show at once.
 */
describe.skipIf(TEST_DB !== 'sqlite')('status reads kept while the database is unchanged', () => {
  let svc: TestService;
  let other: SQLite.Database;
  let uuid: string;
  const status = (key?: string) => svc.call('GET', `/api/v1/jobs/${uuid}/status`, key ? { key } : {});

  beforeAll(async () => {
    svc = await startService({}, { jobTypes: [sleepJobType()] });
    // Another connection to the same file, as another process's would be.
    other = new SQLite(path.join(svc.dataDir, 'media-jobs.sqlite'));
    other.pragma('busy_timeout = 5000');
    const r = await svc.call('POST', '/api/v1/jobs/submit/test-sleep', {
      body: { job_type: 'test-sleep', model: 'v1', input: { ms: 1 } },
    });
    uuid = r.body.data.uuid;
    await waitTerminal(svc.call, uuid);
  });
  afterAll(async () => {
    other?.close();
    await svc?.stop();
  });

  it('answers a repeated status with the same bytes and headers as the first', async () => {
    const first = await status();
    const again = await status();
    expect(first.status).toBe(200);
    expect(again.text).toBe(first.text);
    expect(again.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(again.headers.get('x-request-id')).toBeTruthy();
    expect(again.headers.get('x-request-id')).not.toBe(first.headers.get('x-request-id'));
  });

  it("shows another connection's commit on the next status", async () => {
    await status();
    other.prepare('UPDATE jobs SET status_detail = ? WHERE uuid = ?').run('changed elsewhere', uuid);
    expect((await status()).body.data.status_detail).toBe('changed elsewhere');
    other.prepare('UPDATE jobs SET status_detail = ? WHERE uuid = ?').run('changed again', uuid);
    expect((await status()).body.data.status_detail).toBe('changed again');
  });

  it("shows this process's own writes on the next status", async () => {
    await status();
    sqliteHandle(svc.app.store.db)!
      .prepare('UPDATE jobs SET status_detail = ? WHERE uuid = ?')
      .run('changed here', uuid);
    expect((await status()).body.data.status_detail).toBe('changed here');
    expect((await svc.call('DELETE', `/api/v1/jobs/${uuid}`)).status).toBe(200);
    expect((await status()).body.data.data_removed).toBe(true);
  });

  it("answers another owner's request for a kept job with 404", async () => {
    expect((await status()).status).toBe(200);
    const bob = await svc.newKey('bob');
    const r = await status(bob);
    expect(r.status).toBe(404);
    expect(r.body).toMatchObject({ code: -1, data: {} });
  });
});
