import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { hashKey } from './keys.js';
import type { Database } from './schema.js';

/**
 * Operator tokens (`mja_…`): what the dashboard's operator view and /admin/api accept. Separate
 * from API keys on purpose: an API key never opens the admin routes, nor an admin token the API.
 * 192 random bits, stored as a SHA-256 hash like API keys.
 */
export interface CreatedAdminToken {
  id: string;
  token: string;
  prefix: string;
}

export async function createAdminToken(db: Kysely<Database>, now: number): Promise<CreatedAdminToken> {
  const token = `mja_${randomBytes(24).toString('base64url')}`;
  const id = `adm_${randomBytes(6).toString('hex')}`;
  const prefix = token.slice(0, 10);
  await db
    .insertInto('admin_tokens')
    .values({ id, token_hash: hashKey(token), prefix, created_at: now, revoked_at: null })
    .execute();
  return { id, token, prefix };
}

/** The id of an active token, or undefined (one lookup by the unique hash). */
export async function findActiveAdminToken(db: Kysely<Database>, token: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('admin_tokens')
    .select('id')
    .where('token_hash', '=', hashKey(token))
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return row?.id;
}

export async function revokeAdminToken(db: Kysely<Database>, id: string, now: number): Promise<boolean> {
  const res = await db
    .updateTable('admin_tokens')
    .set({ revoked_at: now })
    .where('id', '=', id)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return Number(res.numUpdatedRows) > 0;
}
