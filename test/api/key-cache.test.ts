import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEY_CACHE_TTL_MS } from '../../src/http/key-cache.js';
import { createKey, revokeKey } from '../../src/store/keys.js';
import { TEST_DB } from '../helpers/db.js';
import { startService, waitFor, type TestService } from '../helpers/service.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startService({ WORKER_CONCURRENCY: '0', RATE_LIMIT_SUBMIT: '0', RATE_LIMIT_READ: '0' });
});
afterAll(() => svc?.stop());

describe('API key cache', () => {
  it('a revoke made in this process takes effect at once', async () => {
    const k = await createKey(svc.app.store.db, 'carol', Date.now());
    expect((await svc.call('GET', '/api/v1/jobs', { key: k.key })).status).toBe(200); // now cached
    expect(await revokeKey(svc.app.store.db, k.id, Date.now())).toBe(true);
    const r = await svc.call('GET', '/api/v1/jobs', { key: k.key });
    expect(r.status).toBe(401);
    expect(r.body.message).toBe('invalid or revoked API key');
  });

  it('a revoke written by another process is honoured within the cache TTL', async () => {
    const k = await createKey(svc.app.store.db, 'dave', Date.now());
    // The cache entry is at most as old as this (it is loaded by the request below).
    const loaded = Date.now();
    expect((await svc.call('GET', '/api/v1/jobs', { key: k.key })).status).toBe(200);
    // What `media-jobs keys revoke` in another process does to this one's view: the row changes, no in-process event.
    const t0 = Date.now();
    await svc.app.store.db.updateTable('api_keys').set({ revoked_at: t0 }).where('id', '=', k.id).execute();
    const first = await svc.call('GET', '/api/v1/jobs', { key: k.key });
    // Served from the cache (no query per request) while the entry is fresh (on a loaded machine the
    // steps above may take longer than the TTL: then only the eventual 401 is checked).
    if (Date.now() - loaded < KEY_CACHE_TTL_MS - 500) expect(first.status).toBe(200);
    await waitFor(
      async () => (await svc.call('GET', '/api/v1/jobs', { key: k.key })).status === 401,
      'the revoke to take effect',
      KEY_CACHE_TTL_MS * 4,
    );
  });

  it.skipIf(TEST_DB !== 'postgres')(
    'on PostgreSQL a revoke also sends a key-revoked NOTIFY for other processes',
    async () => {
      const listener = new pg.Client({ connectionString: svc.app.store.url! });
      await listener.connect();
      try {
        const payloads: string[] = [];
        listener.on('notification', (m) => payloads.push(m.payload ?? ''));
        await listener.query('LISTEN media_jobs');
        const k = await createKey(svc.app.store.db, 'frank', Date.now());
        await revokeKey(svc.app.store.db, k.id, Date.now());
        await waitFor(() => payloads.some((p) => p.endsWith(` key-revoked ${k.id}`)), 'the NOTIFY');
      } finally {
        await listener.end();
      }
    },
  );
});
