import type { Kysely } from 'kysely';
import type { Database } from '../../store/schema.js';

export interface RemoteWorkerInfo {
  id: string;
  name: string;
  job_types: string[];
  created_at: number;
  revoked_at: number | null;
  last_seen_at: number | null;
}

/**
 * Remote workers (bring your own model, issue 12) for the operator view: the one place the worker
 * token store plugs in. Until src/store/worker-tokens.ts exists there are none.
 */
export async function remoteWorkers(_db: Kysely<Database>): Promise<RemoteWorkerInfo[]> {
  return [];
}
