import { createHash, randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { PostgresAdapter, sql, type Kysely } from 'kysely';
import type { Database } from './schema.js';

/** In-process revocations: key caches in this process drop their entries at once. */
const revocations = new EventEmitter().setMaxListeners(0);

/** Calls `listener` with the key id after every revoke made in this process; returns the unsubscribe. */
export function onKeyRevoked(listener: (id: string) => void): () => void {
  revocations.on('revoked', listener);
  return () => revocations.off('revoked', listener);
}

/**
 * The NOTIFY other processes on the same PostgreSQL database receive (pg-notify.ts's channel and
 * "<origin> <name> <arg>" payload). Sent inside the revoking statement's transaction, so it is
 * delivered on commit; a process that misses it still stops accepting the key when its cache
 * entry expires (KEY_CACHE_TTL_MS).
 */
const NOTIFY_CHANNEL = 'media_jobs';
export const KEY_REVOKED_SIGNAL = 'key-revoked';

/** Keys are 192-bit random tokens, so a fast hash is enough; only the hash is stored. */
export function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

export interface CreatedKey {
  id: string;
  owner: string;
  key: string;
  prefix: string;
}

export async function createKey(db: Kysely<Database>, owner: string, now: number): Promise<CreatedKey> {
  const key = `mj_${randomBytes(24).toString('base64url')}`;
  const id = `key_${randomBytes(6).toString('hex')}`;
  const prefix = key.slice(0, 9);
  await db
    .insertInto('api_keys')
    .values({ id, owner, key_hash: hashKey(key), prefix, created_at: now, revoked_at: null })
    .execute();
  return { id, owner, key, prefix };
}

export function listKeys(db: Kysely<Database>) {
  return db
    .selectFrom('api_keys')
    .select(['id', 'owner', 'prefix', 'created_at', 'revoked_at'])
    .orderBy('created_at')
    .execute();
}

/** Revokes by id; returns false when no active key has that id. */
export async function revokeKey(db: Kysely<Database>, id: string, now: number): Promise<boolean> {
  const done = await db.transaction().execute(async (tx) => {
    const res = await tx
      .updateTable('api_keys')
      .set({ revoked_at: now })
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    const changed = Number(res.numUpdatedRows) > 0;
    if (changed && isPostgres(db))
      await sql`SELECT pg_notify(${NOTIFY_CHANNEL}, ${`revoke ${KEY_REVOKED_SIGNAL} ${id}`})`.execute(tx);
    return changed;
  });
  if (done) revocations.emit('revoked', id);
  return done;
}

function isPostgres(db: Kysely<Database>): boolean {
  return db.getExecutor().adapter instanceof PostgresAdapter;
}

export async function countKeys(db: Kysely<Database>): Promise<number> {
  const row = await db
    .selectFrom('api_keys')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  return row.n;
}

/** The id and owner of the active key with this hash (hashKey), or undefined. */
export function findActiveKey(
  db: Kysely<Database>,
  keyHash: string,
): Promise<{ id: string; owner: string } | undefined> {
  return db
    .selectFrom('api_keys')
    .select(['id', 'owner'])
    .where('key_hash', '=', keyHash)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
}
