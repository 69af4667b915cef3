import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { hashKey } from './keys.js';
import type { Database } from './schema.js';

/**
 * Remote worker tokens (`mjw_…`): what /api/v1/worker accepts, and nothing else does. 192 random
 * bits, stored as a SHA-256 hash like API keys. `jobTypes` (null: every declared remote type)
 * limits what the token may claim.
 */
export interface WorkerToken {
  id: string;
  name: string;
  jobTypes: string[] | null;
}

export interface CreatedWorkerToken {
  id: string;
  token: string;
  prefix: string;
}

export const WORKER_TOKEN_PREFIX = 'mjw_';

export async function createWorkerToken(
  db: Kysely<Database>,
  spec: { name: string; jobTypes: string[] | null },
  now: number,
): Promise<CreatedWorkerToken> {
  const token = `${WORKER_TOKEN_PREFIX}${randomBytes(24).toString('base64url')}`;
  const id = `wrk_${randomBytes(6).toString('hex')}`;
  const prefix = token.slice(0, 10);
  await db
    .insertInto('worker_tokens')
    .values({
      id,
      name: spec.name,
      token_hash: hashKey(token),
      prefix,
      job_types: spec.jobTypes === null ? null : JSON.stringify(spec.jobTypes),
      created_at: now,
      revoked_at: null,
      last_seen_at: null,
    })
    .execute();
  return { id, token, prefix };
}

/** The active token with this secret, or undefined (one lookup by the unique hash). */
export async function findActiveWorkerToken(db: Kysely<Database>, token: string): Promise<WorkerToken | undefined> {
  const row = await db
    .selectFrom('worker_tokens')
    .select(['id', 'name', 'job_types'])
    .where('token_hash', '=', hashKey(token))
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return (
    row && {
      id: row.id,
      name: row.name,
      jobTypes: row.job_types === null ? null : (JSON.parse(row.job_types) as string[]),
    }
  );
}

export async function touchWorkerToken(db: Kysely<Database>, id: string, now: number): Promise<void> {
  await db.updateTable('worker_tokens').set({ last_seen_at: now }).where('id', '=', id).execute();
}

export interface WorkerTokenInfo {
  id: string;
  name: string;
  prefix: string;
  job_types: string[];
  created_at: number;
  revoked_at: number | null;
  last_seen_at: number | null;
}

export async function listWorkerTokens(db: Kysely<Database>): Promise<WorkerTokenInfo[]> {
  const rows = await db
    .selectFrom('worker_tokens')
    .select(['id', 'name', 'prefix', 'job_types', 'created_at', 'revoked_at', 'last_seen_at'])
    .orderBy('created_at')
    .execute();
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    prefix: r.prefix,
    job_types: r.job_types === null ? [] : (JSON.parse(r.job_types) as string[]),
    created_at: r.created_at,
    revoked_at: r.revoked_at,
    last_seen_at: r.last_seen_at,
  }));
}

export async function revokeWorkerToken(db: Kysely<Database>, id: string, now: number): Promise<boolean> {
  const res = await db
    .updateTable('worker_tokens')
    .set({ revoked_at: now })
    .where('id', '=', id)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return Number(res.numUpdatedRows) > 0;
}
