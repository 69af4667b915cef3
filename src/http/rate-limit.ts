import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { ApiError } from './api-error.js';

export interface RateLimitOptions {
  /** Requests per minute per API key; 0 turns the limit off. */
  submitPerMinute: number;
  readPerMinute: number;
  /** Counters shared by every API process (REDIS_URL); without it each process counts on its own. */
  redisUrl?: string;
  /** Prefix of the counters' Redis keys (REDIS_KEY_PREFIX). */
  redisPrefix?: string;
}

/** Submits; GETs; other writes (cancel, redeliver), which share the read quota. */
export type RatePolicy = 'submit' | 'read' | 'write';

const WINDOW_MS = 60_000;

export function ratePolicyOf(method: string, url: string): RatePolicy {
  if (method === 'POST' && url.endsWith('/jobs/submit/:jobType')) return 'submit';
  return method === 'GET' || method === 'HEAD' ? 'read' : 'write';
}

/**
 * Per-key fixed one-minute windows through @fastify/rate-limit: in Redis when configured (one
 * INCR per request, shared by every process), else in this process's memory (an LRU). Registered
 * inside the /api/v1 scope after the auth hook, so the key is the API key id. Headers: the
 * plugin's IETF draft fields (`RateLimit-Limit`, `-Remaining`, `-Reset`, and `Retry-After` on
 * 429), plus the structured `RateLimit-Policy` / `RateLimit` fields naming the policy.
 */
export async function registerRateLimits(api: FastifyInstance, opts: RateLimitOptions, log: Logger): Promise<void> {
  const limits: Record<RatePolicy, number> = {
    submit: opts.submitPerMinute,
    read: opts.readPerMinute,
    write: opts.readPerMinute,
  };
  if (limits.submit <= 0 && limits.read <= 0) return;

  let redis: Redis | undefined;
  if (opts.redisUrl) {
    // Fail fast at start-up on a bad REDIS_URL; later outages skip limiting (skipOnError) rather than fail requests.
    redis = new Redis(opts.redisUrl, {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: 5_000,
    });
    let down = false;
    redis.on('error', (err) => {
      if (!down) log.warn({ err }, 'Redis (rate limits) unreachable: requests are not rate limited until it is back');
      down = true;
    });
    redis.on('ready', () => {
      if (down) log.info('Redis (rate limits) reachable again');
      down = false;
    });
    await redis.connect();
    api.addHook('onClose', async () => {
      await redis!.quit().catch(() => redis!.disconnect());
    });
  }

  await api.register(rateLimit, {
    global: false,
    enableDraftSpec: true,
    skipOnError: true,
    cache: 10_000,
    ...(redis ? { redis, nameSpace: opts.redisPrefix ?? 'media-jobs:rate:' } : {}),
  });

  const handlers = {} as Record<RatePolicy, onRequestAsyncHookHandler>;
  for (const policy of ['submit', 'read', 'write'] as const) {
    const max = limits[policy];
    if (max <= 0) continue;
    const limit = api.rateLimit({
      max,
      timeWindow: WINDOW_MS,
      keyGenerator: (req) => `${req.apiKeyId}:${policy}`,
      errorResponseBuilder: (_req, ctx) => {
        const after = Math.max(1, Math.ceil(ctx.ttl / 1000));
        return new ApiError(
          429,
          `rate limit exceeded: ${ctx.max} ${policy} requests per minute for this API key; retry in ${after}s`,
          {
            'retry-after': String(after),
          },
        );
      },
    }) as unknown as (req: FastifyRequest, reply: FastifyReply) => Promise<void>;
    handlers[policy] = async (req, reply) => {
      try {
        await limit(req, reply);
      } finally {
        structuredHeaders(reply, policy);
      }
    };
  }

  api.addHook('onRoute', (route) => {
    const handler = handlers[ratePolicyOf([route.method].flat()[0]!, route.url)] as
      (typeof handlers)[keyof typeof handlers] | undefined;
    if (!handler) return;
    route.onRequest = [...[route.onRequest ?? []].flat(), handler];
  });
}

/** `RateLimit-Policy: "submit";q=60;w=60` and `RateLimit: "submit";r=57;t=42`, from the plugin's draft fields. */
function structuredHeaders(reply: FastifyReply, policy: RatePolicy): void {
  const q = reply.getHeader('ratelimit-limit');
  if (q === undefined) return;
  const r = String(reply.getHeader('ratelimit-remaining') ?? 0);
  const t = Math.max(1, Number(reply.getHeader('ratelimit-reset') ?? 0));
  reply.header('ratelimit-policy', `"${policy}";q=${String(q)};w=${WINDOW_MS / 1000}`);
  reply.header('ratelimit', `"${policy}";r=${r};t=${t}`);
}
