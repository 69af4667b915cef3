import type { Kysely } from 'kysely';
import type { Database } from '../../store/schema.js';
import { listWorkerTokens } from '../../store/worker-tokens.js';

export interface RemoteWorkerInfo {
  id: string;
  name: string;
  /** The job types the token may claim; `["*"]` for every declared remote type. */
  job_types: string[];
  created_at: number;
  revoked_at: number | null;
  /** The token's last call to /api/v1/worker (written at most every few seconds per process). */
  last_seen_at: number | null;
}

/** Remote workers (their tokens) for the operator view. */
export async function remoteWorkers(db: Kysely<Database>): Promise<RemoteWorkerInfo[]> {
  const tokens = await listWorkerTokens(db);
  return tokens.map((t) => ({
    id: t.id,
    name: t.name,
    job_types: t.job_types.length === 0 ? ['*'] : t.job_types,
    created_at: t.created_at,
    revoked_at: t.revoked_at,
    last_seen_at: t.last_seen_at,
  }));
}
