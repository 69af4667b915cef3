import type { Kysely, Selectable } from 'kysely';
import type { Database, IdempotencyKeysTable } from './schema.js';

export type IdempotencyRow = Selectable<IdempotencyKeysTable>;

/** The live record for (owner, key), ignoring one past its expiry. */
export function findIdempotencyKey(db: Kysely<Database>, owner: string, key: string, now: number) {
  return db
    .selectFrom('idempotency_keys')
    .selectAll()
    .where('owner', '=', owner)
    .where('key', '=', key)
    .where('expires_at', '>', now)
    .executeTakeFirst();
}

/** The live records of many keys of one owner (a batch), by key: one statement per 500 keys. */
export async function findIdempotencyKeys(
  db: Kysely<Database>,
  owner: string,
  keys: readonly string[],
  now: number,
): Promise<Map<string, IdempotencyRow>> {
  const out = new Map<string, IdempotencyRow>();
  const unique = [...new Set(keys)];
  for (let i = 0; i < unique.length; i += 500) {
    const rows = await db
      .selectFrom('idempotency_keys')
      .selectAll()
      .where('owner', '=', owner)
      .where('key', 'in', unique.slice(i, i + 500))
      .where('expires_at', '>', now)
      .execute();
    for (const r of rows) out.set(r.key, r);
  }
  return out;
}

/**
 * Reserves (owner, key) inside the submit transaction. An expired record is taken over.
 * Returns false when a live record exists: a concurrent or earlier request owns the key.
 * On PostgreSQL a concurrent insert of the same key waits here until the other commits.
 */
export async function reserveIdempotencyKey(db: Kysely<Database>, row: IdempotencyRow): Promise<boolean> {
  const { owner: _o, key: _k, ...rest } = row;
  const res = await db
    .insertInto('idempotency_keys')
    .values(row)
    .onConflict((oc) =>
      oc.columns(['owner', 'key']).doUpdateSet(rest).where('idempotency_keys.expires_at', '<=', row.created_at),
    )
    .returning('key')
    .executeTakeFirst();
  return res !== undefined;
}

export async function purgeIdempotencyKeys(db: Kysely<Database>, now: number): Promise<number> {
  const res = await db.deleteFrom('idempotency_keys').where('expires_at', '<=', now).executeTakeFirst();
  return Number(res.numDeletedRows);
}
