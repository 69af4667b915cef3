import { Migrator, sql, type Kysely, type Migration, type MigrationProvider } from 'kysely';
import { MIGRATIONS } from './migrations/index.js';
import type { Dialect } from './store.js';

/** The migrations (store/migrations/, in code so the compiled service carries them) for one dialect. */
function migrations(dialect: Dialect): Record<string, Migration> {
  return Object.fromEntries(MIGRATIONS.map(([name, up]) => [name, { up: (db: Kysely<unknown>) => up(db, dialect) }]));
}

export function createMigrator(db: Kysely<unknown>, dialect: Dialect): Migrator {
  const provider: MigrationProvider = { getMigrations: () => Promise.resolve(migrations(dialect)) };
  return new Migrator({
    db,
    provider,
    migrationTableName: 'schema_migrations',
    migrationLockTableName: 'schema_migrations_lock',
  });
}

/** Applies pending migrations; throws with the failing migration's error. */
export async function migrateToLatest(db: Kysely<unknown>, dialect: Dialect): Promise<string[]> {
  if (dialect === 'sqlite') return migrateSqliteExclusively(db);
  return runMigrations(db, dialect);
}

/**
 * Kysely takes no migration lock on SQLite (one connection per process), so two processes started
 * together on a new file would both apply a migration ("duplicate column"). The whole run holds
 * the file's write lock instead (BEGIN IMMEDIATE: the other process waits on busy_timeout, then
 * finds every migration applied); SQLite's DDL is transactional, so a failure leaves nothing half done.
 */
async function migrateSqliteExclusively(db: Kysely<unknown>): Promise<string[]> {
  await sql`BEGIN IMMEDIATE`.execute(db);
  try {
    const applied = await runMigrations(db, 'sqlite');
    await sql`COMMIT`.execute(db);
    return applied;
  } catch (err) {
    await sql`ROLLBACK`.execute(db).catch(() => {});
    throw err;
  }
}

async function runMigrations(db: Kysely<unknown>, dialect: Dialect): Promise<string[]> {
  const { error, results } = await createMigrator(db, dialect).migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error('migration failed', { cause: error });
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/** True when every known migration has been applied (used by readiness checks). */
export async function isUpToDate(db: Kysely<unknown>, dialect: Dialect): Promise<boolean> {
  const list = await createMigrator(db, dialect).getMigrations();
  return list.every((m) => m.executedAt !== undefined);
}
