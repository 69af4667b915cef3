import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/**
 * A secret created once and shared by every process on the same database
 * (e.g. the key that signs result URLs), so any API process can verify any URL.
 */
export async function sharedSecret(db: Kysely<Database>, name: string): Promise<string> {
  await db
    .insertInto('settings')
    .values({ name, value: randomBytes(32).toString('base64url') })
    .onConflict((oc) => oc.column('name').doNothing())
    .execute();
  const row = await db.selectFrom('settings').select('value').where('name', '=', name).executeTakeFirstOrThrow();
  return row.value;
}
