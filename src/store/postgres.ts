import type { Store } from './db.js';

export async function openPostgres(_url: string): Promise<Store> {
  throw new Error('PostgreSQL support is not built yet');
}
