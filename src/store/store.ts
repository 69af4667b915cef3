import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/** What the store's modules (and the dialect's opener) share; db.ts opens one. */
export type Dialect = 'sqlite' | 'postgres';

export interface Store {
  db: Kysely<Database>;
  dialect: Dialect;
  /** The connection URL (PostgreSQL), for the LISTEN connection. */
  url?: string;
  close(): Promise<void>;
  /** PostgreSQL: bound every later query to `ms` (a dead peer then fails fast instead of hanging). */
  boundQueries?(ms: number): void;
}
