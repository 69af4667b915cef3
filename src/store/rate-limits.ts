import { sql, type Kysely } from 'kysely';
import type { Database } from './schema.js';

/** Counts one request in a fixed window; returns the count including this one. */
export async function hit(db: Kysely<Database>, bucket: string, expiresAt: number): Promise<number> {
  const row = await db
    .insertInto('rate_limits')
    .values({ bucket, count: 1, expires_at: expiresAt })
    .onConflict((oc) => oc.column('bucket').doUpdateSet({ count: sql<number>`rate_limits.count + 1` }))
    .returning('count')
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

export async function purgeRateLimits(db: Kysely<Database>, now: number): Promise<void> {
  await db.deleteFrom('rate_limits').where('expires_at', '<=', now).execute();
}
