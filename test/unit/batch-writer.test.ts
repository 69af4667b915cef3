import { describe, expect, it } from 'vitest';
import { BatchWriter, type BatchWriterOptions } from '../../src/runtime/batch-writer.js';
import { DATABASE, isTransactionConflict } from '../../src/store/errors.js';

/** better-sqlite3's error for a write lock held past busy_timeout: a "database unavailable" error. */
const busy = () => Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
const deadlock = () => Object.assign(new Error('deadlock detected'), { code: '40P01' });

interface Item {
  name: string;
  patience?: number;
}

function writer(
  write: (items: readonly Item[]) => Promise<string[]>,
  clock = { t: 0 },
  gather?: BatchWriterOptions<Item, string>['gather'],
) {
  const batches: string[][] = [];
  const committed: string[][] = [];
  const w = new BatchWriter<Item, string>({
    write: (items) => {
      batches.push(items.map((i) => i.name));
      return write(items);
    },
    afterCommit: (items) => committed.push(items.map((i) => i.name)),
    patience: (i) => i.patience ?? 0,
    now: () => clock.t,
    what: 'test writes',
    dependency: DATABASE,
    isConflict: isTransactionConflict,
    gather,
  });
  return { w, batches, committed };
}

const echo = (items: readonly Item[]) => Promise.resolve(items.map((i) => `${i.name}!`));

describe('batch writer', () => {
  it('writes what arrives during a write as the next batch, in order, and answers each caller', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const { w, batches, committed } = writer(async (items) => {
      if (items[0]?.name === 'a') await gate;
      return echo(items);
    });
    const first = w.submit({ name: 'a' });
    const rest = ['b', 'c', 'd'].map((name) => w.submit({ name }));
    release();
    expect(await first).toBe('a!');
    expect(await Promise.all(rest)).toEqual(['b!', 'c!', 'd!']);
    expect(batches).toEqual([['a'], ['b', 'c', 'd']]);
    expect(committed).toEqual(batches);
  });

  it('keeps patient items through an outage and answers impatient ones with the outage error', async () => {
    let failures = 2;
    const { w, batches, committed } = writer((items) => (failures-- > 0 ? Promise.reject(busy()) : echo(items)));
    const patient = w.submit({ name: 'finish', patience: 60_000 });
    const impatient = w.submit({ name: 'submit' });
    await expect(impatient).rejects.toMatchObject({ code: 'SQLITE_BUSY' });
    expect(await patient).toBe('finish!');
    expect(batches.at(-1)).toEqual(['finish']);
    expect(committed).toEqual([['finish']]);
  });

  it('gives up on a patient item once its patience has run out', async () => {
    const clock = { t: 0 };
    const { w } = writer(() => {
      clock.t += 1_000;
      return Promise.reject(busy());
    }, clock);
    await expect(w.submit({ name: 'finish', patience: 2_500 })).rejects.toMatchObject({ code: 'SQLITE_BUSY' });
    await w.drain();
  });

  it('splits a batch that fails for another reason, so one bad item fails alone', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const { w, batches } = writer(async (items) => {
      if (items[0]?.name === 'first') await gate;
      if (items.some((i) => i.name === 'bad')) throw new Error('constraint failed');
      return echo(items);
    });
    const first = w.submit({ name: 'first' });
    const answers = ['x', 'bad', 'y'].map((name) => w.submit({ name }).catch((e: unknown) => (e as Error).message));
    release();
    await first;
    expect(await Promise.all(answers)).toEqual(['x!', 'constraint failed', 'y!']);
    expect(batches).toEqual([['first'], ['x', 'bad', 'y'], ['x'], ['bad'], ['y']]);
  });

  it('retries a batch that deadlocked with another process one item at a time', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const { w, batches } = writer(async (items) => {
      if (items[0]?.name === 'first') await gate;
      if (items.length > 1) throw deadlock();
      return echo(items);
    });
    const first = w.submit({ name: 'first' });
    const answers = ['p', 'q'].map((name) => w.submit({ name }));
    release();
    await first;
    expect(await Promise.all(answers)).toEqual(['p!', 'q!']);
    expect(batches).toEqual([['first'], ['p', 'q'], ['p'], ['q']]);
  });

  it('drain waits for everything submitted', async () => {
    const done: string[] = [];
    const { w } = writer(async (items) => {
      await new Promise((r) => setTimeout(r, 20));
      done.push(...items.map((i) => i.name));
      return echo(items);
    });
    void w.submit({ name: 'a' });
    void w.submit({ name: 'b' });
    await w.drain();
    expect(done).toEqual(['a', 'b']);
  });

  it("gather 'turn': an idle writer writes what arrived in one event-loop turn as one batch", async () => {
    const plain = writer(echo);
    await Promise.all(['a', 'b'].map((name) => plain.w.submit({ name })));
    expect(plain.batches).toEqual([['a'], ['b']]);

    const turn = writer(echo, undefined, 'turn');
    const now = ['a', 'b'].map((name) => turn.w.submit({ name }));
    const later = new Promise<string>((r) => setImmediate(() => r(turn.w.submit({ name: 'c' }))));
    expect(await Promise.all([...now, later])).toEqual(['a!', 'b!', 'c!']);
    expect(turn.batches).toEqual([['a', 'b'], ['c']]);
  });

  it('gather { ms }: a batch waits that long for more, asked afresh for each batch', async () => {
    let lingerMs = 50;
    const { w, batches } = writer(echo, undefined, { ms: () => lingerMs });
    const first = w.submit({ name: 'a' });
    await new Promise((r) => setTimeout(r, 5));
    const second = w.submit({ name: 'b' });
    expect(await Promise.all([first, second])).toEqual(['a!', 'b!']);
    lingerMs = 0;
    await Promise.all(['c', 'd'].map((name) => w.submit({ name })));
    expect(batches).toEqual([['a', 'b'], ['c'], ['d']]);
  });
});
