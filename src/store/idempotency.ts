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

/**
 * Reserves many keys of a batch in multi-row statements (each key at most once); answers the
 * keys that were reserved (new, or taking over an expired record). A key a live record holds is
 * left out: its item is answered as that record's replay.
 */
export async function reserveIdempotencyKeys(
  db: Kysely<Database>,
  rows: readonly IdempotencyRow[],
): Promise<Set<string>> {
  const reserved = new Set<string>();
  for (let i = 0; i < rows.length; i += 500) {
    const res = await db
      .insertInto('idempotency_keys')
      .values(rows.slice(i, i + 500))
      .onConflict((oc) =>
        oc
          .columns(['owner', 'key'])
          .doUpdateSet((eb) => ({
            fingerprint: eb.ref('excluded.fingerprint'),
            response_status: eb.ref('excluded.response_status'),
            response_body: eb.ref('excluded.response_body'),
            request_id: eb.ref('excluded.request_id'),
            job_uuid: eb.ref('excluded.job_uuid'),
            created_at: eb.ref('excluded.created_at'),
            expires_at: eb.ref('excluded.expires_at'),
          }))
          .whereRef('idempotency_keys.expires_at', '<=', 'excluded.created_at'),
      )
      .returning('key')
      .execute();
    for (const r of res) reserved.add(r.key);
  }
  return reserved;
}

export async function purgeIdempotencyKeys(db: Kysely<Database>, now: number): Promise<number> {
  const res = await db.deleteFrom('idempotency_keys').where('expires_at', '<=', now).executeTakeFirst();
  return Number(res.numDeletedRows);
}
