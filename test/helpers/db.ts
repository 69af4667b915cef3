import { randomBytes } from 'node:crypto';
import path from 'node:path';
import pg from 'pg';
import { openStore } from '../../src/store/db.js';
import type { Store } from '../../src/store/store.js';
import { ADMIN_URL, postgresReachable } from './pg-admin.js';
import { tempDir } from './service.js';

/** Which database the integration suite runs on: set per vitest project (see vitest.config.ts). */
export const TEST_DB: 'sqlite' | 'postgres' = process.env.TEST_DB === 'postgres' ? 'postgres' : 'sqlite';
export { ADMIN_URL, postgresReachable };

const created: string[] = [];

/** A fresh PostgreSQL database for one service under test; dropped by dropTestDatabases(). */
export async function createTestDatabase(): Promise<string> {
  const name = `mj_test_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  created.push(name);
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

export async function dropTestDatabases(): Promise<void> {
  if (created.length === 0) return;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  try {
    for (const name of created.splice(0)) await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

/** DATA_DIR (results, and the SQLite file) plus DATABASE_URL when the suite runs on PostgreSQL. */
export async function storeEnv(dataDir = tempDir()): Promise<Record<string, string>> {
  // Small pools: a loaded CI machine runs many services at once against one max_connections=100 server.
  return TEST_DB === 'postgres'
    ? { DATA_DIR: dataDir, DATABASE_URL: await createTestDatabase(), DATABASE_POOL_SIZE: '4' }
    : { DATA_DIR: dataDir };
}

/** A fresh database's URL for TEST_DB: a new PostgreSQL database, or a SQLite file in a new temp dir. */
export async function testStoreUrl(prefix = 'mj-store-'): Promise<string> {
  return TEST_DB === 'postgres' ? createTestDatabase() : `sqlite:${path.join(tempDir(prefix), 'db.sqlite')}`;
}

/** A store on a fresh database for TEST_DB (migrated); the caller closes it. */
export async function testStore(prefix?: string): Promise<Store> {
  return openStore(await testStoreUrl(prefix));
}
