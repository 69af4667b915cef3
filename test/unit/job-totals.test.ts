import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { JobLifecycle } from '../../src/jobs/lifecycle.js';
import { Signals } from '../../src/signals.js';
import { openStore } from '../../src/store/db.js';
import type { Store } from '../../src/store/store.js';
import type { NewJob } from '../../src/store/jobs.js';
import { finishedPerMinute, readJobTotals } from '../../src/store/totals.js';
import { createTestDatabase, postgresReachable } from '../helpers/db.js';
import { tempDir } from '../helpers/service.js';

/**
 * The cluster's job totals and per-minute finishes (migration 010's triggers) against the jobs
 * table itself, through the one write path, on a real database file and a real server.
 */

const dialects = ['sqlite', ...((await postgresReachable()) ? ['postgres'] : [])] as const;
const MINUTE = 60_000;

describe.each(dialects)('job totals on %s', (dialect) => {
  let store: Store;
  let clock = 1_000 * MINUTE;
  let seq = 0;
  let life: JobLifecycle;

  beforeAll(async () => {
    store = await openStore(dialect === 'sqlite' ? `sqlite:${tempDir()}/totals.sqlite` : await createTestDatabase(), {
      poolSize: 4,
    });
    life = new JobLifecycle({
      store,
      clock: { now: () => clock },
      config: loadConfig({}),
      signals: new Signals(),
      log: pino({ level: 'silent' }),
    });
  });
  afterAll(() => store?.close());

  const submit = async (jobType: string) => {
    const uuid = `00000000-0000-4000-8000-${(++seq).toString(16).padStart(12, '0')}`;
    const row: NewJob = {
      uuid,
      owner: 'o',
      job_type: jobType,
      model: 'v1',
      input: '{}',
      webhook: null,
      status: 'queued',
      status_detail: 'waiting for a worker',
      created_at: clock,
      updated_at: clock,
    };
    expect(await life.create(row)).toBe(true);
    return uuid;
  };

  /** What the counters should say, counted from the jobs table. */
  const truth = async () => {
    const rows = await store.db.selectFrom('jobs').select(['job_type', 'status']).execute();
    const out = new Map<string, number>();
    const add = (k: string) => out.set(k, (out.get(k) ?? 0) + 1);
    for (const r of rows) {
      add(`${r.job_type}/submitted`);
      if (['completed', 'failed', 'cancelled'].includes(r.status)) add(`${r.job_type}/${r.status}`);
    }
    return out;
  };
  const totals = async () => new Map((await readJobTotals(store.db)).map((t) => [`${t.job_type}/${t.event}`, t.n]));

  it('counts submits and every kind of finish, and nothing else (claims, renewals, hand-backs)', async () => {
    const a = await Promise.all(Array.from({ length: 6 }, () => submit('a')));
    const b = await Promise.all(Array.from({ length: 3 }, () => submit('b')));
    const claimed = await life.claim({ leaseOwner: 'w1', jobTypes: ['a'], limit: 5 });
    expect(claimed).toHaveLength(5);
    const held = (i: number) => ({ uuid: claimed[i]!.uuid, lease: 'w1', job_type: 'a' });
    expect(await life.progress(held(0), 'working')).toBe(true);
    // Arriving together, these share batches (one transaction, several statements).
    await Promise.all([
      life.complete(held(0), { key: 'k0', contentType: 'image/png', size: 1 }),
      life.complete(held(1), { key: 'k1', contentType: 'image/png', size: 1 }),
      life.fail(held(2), { errorType: 'internal_error', message: 'boom' }),
      life.handBack(held(3)),
      life.cancel('o', b[0]!),
      life.cancel('o', claimed[4]!.uuid),
    ]);
    // A cancel of a finished job changes nothing, and is not counted again.
    expect(await life.cancel('o', claimed[0]!.uuid)).toBeUndefined();
    expect(a).toHaveLength(6);
    expect(await totals()).toEqual(await truth());
    const t = await totals();
    expect([t.get('a/submitted'), t.get('a/completed'), t.get('a/failed'), t.get('a/cancelled')]).toEqual([6, 2, 1, 1]);
    expect([t.get('b/submitted'), t.get('b/cancelled')]).toEqual([3, 1]);
  });

  it('counts finishes per minute of finished_at, in a ring that forgets minutes older than an hour', async () => {
    const minute = Math.floor(clock / MINUTE);
    expect((await finishedPerMinute(store.db, minute, minute)).get(minute)).toBe(5);
    // An hour later the same ring slot holds the new minute only.
    clock += 60 * MINUTE;
    const later = Math.floor(clock / MINUTE);
    expect(later % 60).toBe(minute % 60);
    const u = await submit('a');
    expect(await life.cancel('o', u)).toBeDefined();
    const counts = await finishedPerMinute(store.db, later - 59, later);
    expect([...counts]).toEqual([[later, 1]]);
    expect((await finishedPerMinute(store.db, minute, minute)).size).toBe(0);
    expect(await totals()).toEqual(await truth());
  });
});
