import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Clock } from '../clock.js';
import type { Store } from '../store/db.js';
import { hit } from '../store/rate-limits.js';
import { ApiError } from './api-error.js';

export interface RateLimitOptions {
  /** Requests per minute per API key; 0 turns the limit off. */
  submitPerMinute: number;
  readPerMinute: number;
}

const WINDOW_MS = 60_000;

/**
 * Per-key fixed one-minute windows. On SQLite (one process) the counters live in memory; on
 * PostgreSQL they live in the database so every API process shares them. Headers follow the IETF
 * RateLimit draft: `RateLimit-Policy` and `RateLimit`, plus `Retry-After` on 429.
 */
export function rateLimitHook(store: Store, clock: Clock, opts: RateLimitOptions) {
  const memory = new Map<string, { count: number; expiresAt: number }>();
  let lastSweep = 0;

  const count = async (bucket: string, expiresAt: number, now: number): Promise<number> => {
    if (store.dialect === 'postgres') return hit(store.db, bucket, expiresAt);
    if (now - lastSweep > WINDOW_MS) {
      lastSweep = now;
      for (const [k, v] of memory) if (v.expiresAt <= now) memory.delete(k);
    }
    const entry = memory.get(bucket);
    if (entry && entry.expiresAt > now) return ++entry.count;
    memory.set(bucket, { count: 1, expiresAt });
    return 1;
  };

  return async (request: FastifyRequest, reply: FastifyReply) => {
    const isSubmit = request.method === 'POST' && request.routeOptions.url?.endsWith('/jobs/submit/:jobType');
    const policy = isSubmit ? 'submit' : request.method === 'GET' ? 'read' : 'write';
    const limit = isSubmit ? opts.submitPerMinute : opts.readPerMinute;
    if (limit <= 0) return;
    const now = clock.now();
    const windowStart = Math.floor(now / WINDOW_MS) * WINDOW_MS;
    const resetS = Math.max(1, Math.ceil((windowStart + WINDOW_MS - now) / 1000));
    const used = await count(`${request.apiKeyId}:${policy}:${windowStart}`, windowStart + WINDOW_MS, now);
    const remaining = Math.max(0, limit - used);
    reply.header('ratelimit-policy', `"${policy}";q=${limit};w=60`);
    reply.header('ratelimit', `"${policy}";r=${remaining};t=${resetS}`);
    if (used > limit) {
      throw new ApiError(429, `rate limit exceeded: ${limit} ${policy} requests per minute for this API key; retry in ${resetS}s`, {
        'retry-after': String(resetS),
      });
    }
  };
}
