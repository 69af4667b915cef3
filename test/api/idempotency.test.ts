import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type TestService } from '../helpers/service.js';

const offset = { ms: 0 };
let svc: TestService;
beforeAll(async () => {
  svc = await startService({ WORKER_CONCURRENCY: '0' }, { clock: { now: () => Date.now() + offset.ms } });
});
afterAll(() => svc?.stop());

const body = (width = 100) => ({
  job_type: 'image-transform',
  model: 'lanczos3',
  input: { source: 'http://127.0.0.1:9/a.jpg', width, format: 'png' },
});
const submit = (key: string | undefined, b: unknown, apiKey?: string) =>
  svc.call('POST', '/api/v1/jobs/submit/image-transform', {
    body: b,
    headers: key === undefined ? {} : { 'idempotency-key': key },
    ...(apiKey ? { key: apiKey } : {}),
  });

async function jobCount(): Promise<number> {
  const r = await svc.app.store.db
    .selectFrom('jobs')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  return r.n;
}

describe('Idempotency-Key', () => {
  it('replays the original response for the same body, in any key order', async () => {
    const first = await submit('order-1', body(100));
    expect(first.status).toBe(200);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const b = body(100);
    const reordered = {
      input: { format: 'png', width: 100, source: b.input.source },
      model: b.model,
      job_type: b.job_type,
    };
    const again = await submit('order-1', reordered);
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('x-request-id')).toBe(first.headers.get('x-request-id'));
    expect(again.text).toBe(first.text);
  });

  it('answers 409 for the same key with a different body, and creates nothing', async () => {
    await submit('diff-1', body(100));
    const before = await jobCount();
    const r = await submit('diff-1', body(101));
    expect(r.status).toBe(409);
    expect(r.body.code).toBe(-1);
    expect(r.body.message).toMatch(/^Idempotency-Key: already used with a different request/);
    expect(await jobCount()).toBe(before);
  });

  it('creates a new job for each request without a key', async () => {
    const a = await submit(undefined, body());
    const b = await submit(undefined, body());
    expect(a.body.data.uuid).not.toBe(b.body.data.uuid);
  });

  it('creates exactly one job for concurrent requests with one key', async () => {
    const before = await jobCount();
    const replies = await Promise.all(Array.from({ length: 25 }, () => submit('race-1', body(7))));
    expect(replies.every((r) => r.status === 200)).toBe(true);
    expect(new Set(replies.map((r) => r.body.data.uuid)).size).toBe(1);
    expect(replies.filter((r) => r.headers.get('idempotent-replayed') === 'true')).toHaveLength(24);
    expect(await jobCount()).toBe(before + 1);
  });

  it('scopes keys per owner', async () => {
    const bob = await svc.newKey('bob');
    const a = await submit('shared-key', body());
    const b = await submit('shared-key', body(), bob);
    expect(b.status).toBe(200);
    expect(b.headers.get('idempotent-replayed')).toBeNull();
    expect(b.body.data.uuid).not.toBe(a.body.data.uuid);
  });

  it('does not store a rejected request: the key stays free', async () => {
    const bad = await submit('fix-1', { ...body(), model: 'nope' });
    expect(bad.status).toBe(400);
    const good = await submit('fix-1', body());
    expect(good.status).toBe(200);
    expect(good.headers.get('idempotent-replayed')).toBeNull();
  });

  it.each([['x'.repeat(256)], ['tab\there'], ['caf\u00e9']])(
    'rejects the malformed key %j with 400 and creates nothing',
    async (key) => {
      const before = await jobCount();
      // node:http sends header bytes as latin1, so non-ASCII keys reach the server as they would from curl.
      const r = await new Promise<{ status: number; body: any }>((resolve, reject) => {
        const payload = JSON.stringify(body());
        const req = http.request(
          `${svc.base}/api/v1/jobs/submit/image-transform`,
          {
            method: 'POST',
            headers: { authorization: `Bearer ${svc.key}`, 'content-type': 'application/json', 'idempotency-key': key },
          },
          (res) => {
            let text = '';
            res
              .setEncoding('utf8')
              .on('data', (c: Buffer) => (text += c.toString()))
              .on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
          },
        );
        req.on('error', reject);
        req.end(payload);
      });
      expect(r.status).toBe(400);
      expect(r.body).toEqual({
        code: -1,
        message: 'Idempotency-Key: must be 1 to 255 printable ASCII characters',
        data: {},
      });
      expect(await jobCount()).toBe(before);
    },
  );

  it('forgets keys after IDEMPOTENCY_TTL (24 h) and purges them', async () => {
    const first = await submit('ttl-1', body());
    offset.ms = 24 * 3600_000 + 1000;
    try {
      const after = await submit('ttl-1', body(333));
      expect(after.status).toBe(200);
      expect(after.headers.get('idempotent-replayed')).toBeNull();
      expect(after.body.data.uuid).not.toBe(first.body.data.uuid);

      await submit('ttl-2', body());
      offset.ms = 2 * (24 * 3600_000 + 1000);
      const { app } = svc;
      // The service's own housekeeping, on the service's clock (moved two TTLs ahead).
      await app.housekeeping.runOnce();
      const left = await app.store.db
        .selectFrom('idempotency_keys')
        .select('key')
        .where('key', 'in', ['ttl-1', 'ttl-2'])
        .execute();
      expect(left).toEqual([]);
    } finally {
      offset.ms = 0;
    }
  });
});
