import fs from 'node:fs';
import SQLite from 'better-sqlite3';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/db.js';
import { isUpToDate, migrateToLatest } from '../../src/store/migrate.js';
import { MIGRATIONS } from '../../src/store/migrations/index.js';
import type { Dialect, Store } from '../../src/store/store.js';
import { createTestDatabase, postgresReachable } from '../helpers/db.js';
import { tempDir } from '../helpers/service.js';

/**
 * The migrations are one module each (src/store/migrations/). A database the earlier single-file
 * migrations left behind (the fixtures: a real SQLite file's contents and a pg_dump, taken from
 * that code) must open as up to date, and a new database must get the very same schema.
 */

/** The names existing databases hold in schema_migrations: released, so never to change (a new one goes at the end). */
const RELEASED = [
  '001_initial',
  '002_rate_limits',
  '003_queue_engine',
  '004_webhook_dispatch',
  '005_drop_rate_limits',
  '007_admin_tokens',
  '008_remote_workers',
  '009_jobs_round2',
  '010_cluster_counters',
  '011_webhook_endpoints',
  '012_webhook_pending_due',
  '013_webhook_events_fillfactor',
  '014_webhook_claim_rooms',
  '015_webhook_attempts_logged',
  '016_webhook_events_job_hash',
  '017_webhook_claim_cursor',
];
/** The migrations after the fixtures' databases were taken. */
const SINCE_FIXTURES = [
  '012_webhook_pending_due',
  '013_webhook_events_fillfactor',
  '014_webhook_claim_rooms',
  '015_webhook_attempts_logged',
  '016_webhook_events_job_hash',
  '017_webhook_claim_cursor',
];

const fixture = (name: string) => fs.readFileSync(new URL(`fixtures/${name}`, import.meta.url), 'utf8');
/** Schema text compared without its layout (the SQL moved between files, its indentation with it). */
const squash = (s: string) => s.replace(/\s+/g, ' ').trim();
const dialects: Dialect[] = ['sqlite', ...((await postgresReachable()) ? (['postgres'] as const) : [])];

async function appliedNames(store: Store): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`SELECT name FROM schema_migrations ORDER BY name`.execute(store.db);
  return rows.map((r) => r.name);
}

describe('migrations', () => {
  it('keep the released names, in order', () => {
    expect(MIGRATIONS.map(([name]) => name)).toEqual(RELEASED);
  });
});

describe.each(dialects)('migrations on %s', (dialect) => {
  const stores: Store[] = [];
  afterAll(async () => {
    for (const s of stores) await s.close();
  });

  /** A database as the earlier code left it, opened by this code without migrating. */
  async function oldDatabase(): Promise<string> {
    if (dialect === 'sqlite') {
      const file = `${tempDir()}/old.sqlite`;
      const db = new SQLite(file);
      db.exec(fixture('migrated-011.sqlite.sql'));
      db.close();
      return `sqlite:${file}`;
    }
    const url = await createTestDatabase();
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    await c.query(fixture('migrated-011.pg.sql'));
    await c.end();
    return url;
  }

  async function open(url: string, migrate: boolean): Promise<Store> {
    const store = await openStore(url, { migrate, poolSize: 2 });
    stores.push(store);
    return store;
  }

  it('a database migrated by the earlier code gets only the later migrations, and then is up to date', async () => {
    const url = await oldDatabase();
    const store = await open(url, false);
    expect(await isUpToDate(store.db as Kysely<unknown>, dialect)).toBe(SINCE_FIXTURES.length === 0);
    expect(await migrateToLatest(store.db as Kysely<unknown>, dialect)).toEqual(SINCE_FIXTURES);
    expect(await isUpToDate(store.db as Kysely<unknown>, dialect)).toBe(true);
    expect(await migrateToLatest(store.db as Kysely<unknown>, dialect)).toEqual([]);
    expect(await appliedNames(store)).toEqual(RELEASED);
  });

  it('a new database gets the released names and the schema of an earlier database migrated on', async () => {
    const fresh = await open(
      dialect === 'sqlite' ? `sqlite:${tempDir()}/new.sqlite` : await createTestDatabase(),
      true,
    );
    expect(await appliedNames(fresh)).toEqual(RELEASED);
    const old = await open(await oldDatabase(), true);
    expect(await schemaOf(fresh)).toEqual(await schemaOf(old));
  });

  /** Every table column, index, trigger and trigger function, as the database states them. */
  async function schemaOf(store: Store): Promise<string[]> {
    const text =
      dialect === 'sqlite'
        ? `SELECT type || ' ' || name || ' ' || sql AS s FROM sqlite_master WHERE sql IS NOT NULL`
        : `SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') AS s
             FROM information_schema.columns WHERE table_schema = 'public'
           UNION ALL SELECT indexdef FROM pg_indexes WHERE schemaname = 'public'
           UNION ALL SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal
           UNION ALL SELECT pg_get_functiondef(p.oid) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE n.nspname = 'public'
           UNION ALL SELECT c.relname || ' ' || array_to_string(c.reloptions, ',') FROM pg_class c
             WHERE c.reloptions IS NOT NULL AND c.relnamespace = 'public'::regnamespace`;
    const { rows } = await sql.raw<{ s: string }>(text).execute(store.db);
    return rows.map((r) => squash(r.s)).sort();
  }
});
