import { type Kysely } from 'kysely';

/**
 * Rate limits moved to @fastify/rate-limit (Redis or process memory): no per-request write.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('rate_limits').ifExists().execute();
}
