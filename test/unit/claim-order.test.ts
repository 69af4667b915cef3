import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../../src/config.js';
import { JobLifecycle } from '../../src/jobs/lifecycle.js';
import { Signals } from '../../src/signals.js';
import { openStore } from '../../src/store/db.js';
import type { Store } from '../../src/store/store.js';
import { countActive, jobsAhead, type NewJob } from '../../src/store/jobs.js';
import { createTestDatabase, postgresReachable } from '../helpers/db.js';
import { tempDir } from '../helpers/service.js';

/** The claim order (start-time fair queueing), on a real database file / server, through the lifecycle. */

const dialects = ['sqlite', ...((await postgresReachable()) ? ['postgres'] : [])] as const;

describe.each(dialects)('claim order on %s', (dialect) => {
  let store: Store;
  let clock = 1_000_000;
  let seq = 0;
  const make = (config: Partial<Config> = {}) =>
    new JobLifecycle({
      store,
      clock: { now: () => clock },
      config: { ...loadConfig({}), ...config },
      signals: new Signals(),
      log: pino({ level: 'silent' }),
    });
  let life: JobLifecycle;

  beforeAll(async () => {
    store = await openStore(dialect === 'sqlite' ? `sqlite:${tempDir()}/claims.sqlite` : await createTestDatabase(), {
      poolSize: 2,
    });
    life = make();
  });
  afterAll(() => store?.close());

  const submit = async (owner: string, jobType = 'a', opts: { priority?: number; sameMs?: boolean } = {}) => {
    if (!opts.sameMs) clock += 1;
    const uuid = `00000000-0000-4000-8000-${(++seq).toString(16).padStart(12, '0')}`;
    const row: NewJob = {
      uuid,
      owner,
      job_type: jobType,
      model: 'v1',
      input: '{}',
      webhook: null,
      status: 'queued',
      status_detail: 'waiting for a worker',
      created_at: clock,
      updated_at: clock,
      priority: opts.priority ?? 0,
    };
    expect(await life.create(row)).toBe(true);
    return `${owner}${seq}`;
  };
  const claim = async (limit: number, types = ['a'], l = life) =>
    (await l.claim({ leaseOwner: `t/${++seq}`, jobTypes: types, limit })).map((r) => r.owner);
  const drain = async () => {
    while ((await claim(100, ['a', 'b'])).length > 0);
  };

  it('is first-in, first-out within one owner', async () => {
    for (let i = 0; i < 5; i++) await submit('solo');
    const got = await store.db
      .selectFrom('jobs')
      .select(['uuid'])
      .where('owner', '=', 'solo')
      .orderBy('created_at')
      .execute();
    const claimed = await life.claim({ leaseOwner: 'fifo', jobTypes: ['a'], limit: 5 });
    expect(claimed.map((r) => r.uuid)).toEqual(got.map((r) => r.uuid));
  });

  it('runs a prioritised job first and the rest in submission order, even when made in one millisecond', async () => {
    await drain();
    const uuids = async (owner: string) =>
      (await store.db.selectFrom('jobs').select('uuid').where('owner', '=', owner).orderBy('uuid').execute()).map(
        (r) => r.uuid,
      );
    // p1 and p2 tie on rank (same created_at, priority 0); their uuids are in submission order.
    await submit('P');
    await submit('P', 'a', { sameMs: true });
    await submit('P', 'a', { priority: 600 });
    const [p1, p2, p3] = await uuids('P');
    const order: string[] = [];
    for (let i = 0; i < 3; i++)
      order.push(...(await life.claim({ leaseOwner: `p/${i}`, jobTypes: ['a'], limit: 1 })).map((r) => r.uuid));
    expect(order).toEqual([p3, p1, p2]);
  });

  it("interleaves a second owner's jobs with a first owner's burst (round robin)", async () => {
    await drain();
    for (let i = 0; i < 10; i++) await submit('A');
    for (let i = 0; i < 3; i++) await submit('B');
    expect(await claim(8)).toEqual(['A', 'B', 'A', 'B', 'A', 'B', 'A', 'A']);
  });

  it('puts a newcomer at the head of the queue, not behind the backlog', async () => {
    await drain();
    for (let i = 0; i < 50; i++) await submit('A');
    expect(await claim(10)).toEqual(Array(10).fill('A'));
    await submit('C');
    // One of A's jobs shares C's virtual start and was submitted earlier; then C.
    expect(await claim(2)).toEqual(['A', 'C']);
  });

  it('counts the place in the queue in claim order, capped', async () => {
    await drain();
    for (let i = 0; i < 6; i++) await submit('A');
    await submit('D');
    const d = await store.db
      .selectFrom('jobs')
      .selectAll()
      .where('owner', '=', 'D')
      .where('status', '=', 'queued')
      .executeTakeFirstOrThrow();
    // D ties with A's first job (submitted earlier): one job ahead of it.
    expect(await jobsAhead(store.db, d, 1000)).toBe(1);
    const lastA = await store.db
      .selectFrom('jobs')
      .selectAll()
      .where('owner', '=', 'A')
      .where('status', '=', 'queued')
      .orderBy('vtime', 'desc')
      .executeTakeFirstOrThrow();
    expect(await jobsAhead(store.db, lastA, 1000)).toBe(6);
    expect(await jobsAhead(store.db, lastA, 3)).toBe(3);
  });

  it('claims only the asked job types, merged in claim order', async () => {
    await drain();
    await submit('A', 'a');
    await submit('A', 'b');
    await submit('A', 'a');
    expect((await life.claim({ leaseOwner: 'types-1', jobTypes: ['b'], limit: 10 })).map((r) => r.job_type)).toEqual([
      'b',
    ]);
    expect(
      (await life.claim({ leaseOwner: 'types-2', jobTypes: ['a', 'b'], limit: 10 })).map((r) => r.job_type),
    ).toEqual(['a', 'a']);
  });

  it('keeps the queue depth counters exact through claims, hand-backs, finishes and cancels', async () => {
    await drain();
    const before = await countActive(store.db);
    const running = before.processing;
    for (let i = 0; i < 4; i++) await submit('E');
    expect(await countActive(store.db)).toEqual({ queued: before.queued + 4, processing: running });
    const [j1, j2, j3] = await life.claim({ leaseOwner: 'counts', jobTypes: ['a'], limit: 3 });
    expect(await countActive(store.db)).toEqual({ queued: before.queued + 1, processing: running + 3 });
    await life.complete(
      { uuid: j1!.uuid, lease: 'counts', job_type: 'a' },
      { key: 'k', contentType: 'text/plain', size: 1 },
    );
    await life.handBack({ uuid: j2!.uuid, lease: 'counts', job_type: 'a' });
    expect(await life.cancel('E', j3!.uuid)).toBeDefined();
    expect(await countActive(store.db)).toEqual({ queued: before.queued + 2, processing: running });
  });

  it('gives a job handed back its old place (ahead of later jobs)', async () => {
    await drain();
    await submit('F');
    const [first] = await life.claim({ leaseOwner: 'hb', jobTypes: ['a'], limit: 1 });
    await submit('F');
    await life.handBack({ uuid: first!.uuid, lease: 'hb', job_type: 'a' });
    const [again] = await life.claim({ leaseOwner: 'hb2', jobTypes: ['a'], limit: 1 });
    expect(again!.uuid).toBe(first!.uuid);
  });

  it('never lets an owner past OWNER_MAX_RUNNING, and skips its jobs for others', async () => {
    await drain();
    const limited = make({ ownerMaxRunning: 1 });
    for (let i = 0; i < 5; i++) await submit('G');
    for (let i = 0; i < 2; i++) await submit('H');
    const first = await claim(10, ['a'], limited);
    expect(first.sort()).toEqual(['G', 'H']);
    expect(await claim(10, ['a'], limited)).toEqual([]);
  });
});
