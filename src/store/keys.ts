import { createHash, randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

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
  const res = await db
    .updateTable('api_keys')
    .set({ revoked_at: now })
    .where('id', '=', id)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return Number(res.numUpdatedRows) > 0;
}

export async function countKeys(db: Kysely<Database>): Promise<number> {
  const row = await db.selectFrom('api_keys').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}

/** The id and owner of an active key, or undefined. */
export function findActiveKey(db: Kysely<Database>, key: string): Promise<{ id: string; owner: string } | undefined> {
  return db
    .selectFrom('api_keys')
    .select(['id', 'owner'])
    .where('key_hash', '=', hashKey(key))
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
}
