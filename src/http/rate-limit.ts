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

/** POST /jobs/batch counts each item as one submit: its limit runs after the body is parsed. */
const isBatch = (method: string, url: string) => method === 'POST' && url.endsWith('/jobs/batch');

/**
 * A counter key carries its weight after this mark (the plugin's stores count one per request),
 * and then the request's own mark, under which a refusal records what was left.
 */
const WEIGHT_MARK = '|w=';
const MARK_MARK = '|m=';

/** A batch's count, set by its route before the limit runs: its items that do not replay a stored submit. */
const submitWeights = new WeakMap<FastifyRequest, number>();
export function setSubmitWeight(req: FastifyRequest, items: number): void {
  submitWeights.set(req, items);
}

function weightOf(req: FastifyRequest): number {
  return submitWeights.get(req) ?? 1;
}

type IncrCallback = (err: Error | null, res?: { current: number; ttl: number }) => void;

/** INCRBY with the window's expiry; a weight over what is left is refused whole and not counted. */
const WEIGHTED_INCR = `
  local window = tonumber(ARGV[1])
  local max = tonumber(ARGV[2])
  local w = tonumber(ARGV[3])
  local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
  if w == 0 then
    local ttl = redis.call('PTTL', KEYS[1])
    if ttl < 0 then ttl = window end
    return {math.min(cur, max), ttl}
  end
  if w > 1 and cur + w > max then
    local ttl = redis.call('PTTL', KEYS[1])
    if ttl < 0 then ttl = window end
    return {cur + w, ttl}
  end
  local n = redis.call('INCRBY', KEYS[1], w)
  if n == w then redis.call('PEXPIRE', KEYS[1], window) end
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl < 0 then ttl = window end
  return {n, ttl}
`;

/**
 * The counters behind @fastify/rate-limit (its `store` option): fixed windows that count a
 * request by its weight (a batch's items), in Redis (one script call) or in this process (an LRU).
 * A weighted request over what is left of the window is refused whole and counts nothing; what
 * was left is kept in `refused` under the request's mark, for its headers (the plugin says 0).
 * A weight of 0 (a batch that only replays) counts nothing and is never refused.
 */
function weightedStore(redis: Redis | undefined, prefix: string, capacity: number, refused: Map<string, number>) {
  const local = new Map<string, { count: number; start: number }>();
  if (redis) redis.defineCommand('mediaJobsRate', { numberOfKeys: 1, lua: WEIGHTED_INCR });
  return class WeightedStore {
    child(): this {
      return this;
    }

    incr(raw: string, done: IncrCallback, window: number, max: number): void {
      const at = raw.lastIndexOf(WEIGHT_MARK);
      const key = at < 0 ? raw : raw.slice(0, at);
      const [weightText = '1', mark = ''] = at < 0 ? [] : raw.slice(at + WEIGHT_MARK.length).split(MARK_MARK);
      const weight = Number(weightText);
      const cb: IncrCallback = (err, res) => {
        if (res && weight > 1 && res.current > max) refused.set(mark, Math.max(0, max - (res.current - weight)));
        done(err, res);
      };
      if (redis) {
        // A method of the client (defineCommand): called on it, not detached.
        const client = redis as unknown as { mediaJobsRate(...a: unknown[]): Promise<[number, number]> };
        client.mediaJobsRate(prefix + key, window, max, weight).then(
          ([current, ttl]) => {
            cb(null, { current, ttl });
          },
          (err: unknown) => {
            cb(err instanceof Error ? err : new Error(String(err)));
          },
        );
        return;
      }
      // Intervals of real time (monotonic), like every window in the service.
      const now = performance.now();
      let entry = local.get(key);
      if (!entry || entry.start + window <= now) entry = { count: 0, start: now };
      local.delete(key); // most recently used last: the first key is the one to evict
      local.set(key, entry);
      if (local.size > capacity) local.delete(local.keys().next().value!);
      const ttl = Math.max(0, Math.round(entry.start + window - now));
      if (weight === 0) {
        cb(null, { current: Math.min(entry.count, max), ttl });
        return;
      }
      if (weight > 1 && entry.count + weight > max) {
        cb(null, { current: entry.count + weight, ttl });
        return;
      }
      entry.count += weight;
      cb(null, { current: entry.count, ttl });
    }
  };
}

export function ratePolicyOf(method: string, url: string): RatePolicy {
  if (method === 'POST' && (url.endsWith('/jobs/submit/:jobType') || isBatch(method, url))) return 'submit';
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

  // What was left when a weighted request was refused, by the request's mark (read once, in its hook).
  const refused = new Map<string, number>();
  const redis = opts.redisUrl ? await connectRedis(api, opts.redisUrl, log) : undefined;
  await api.register(rateLimit, {
    global: false,
    enableDraftSpec: true,
    skipOnError: true,
    store: weightedStore(redis, opts.redisPrefix ?? 'media-jobs:rate:', 10_000, refused),
  });
  const handlers = limitHandlers(api, limits, refused);
  api.addHook('onRoute', (route) => {
    const method = [route.method].flat()[0]!;
    const handler = handlers[ratePolicyOf(method, route.url)] as (typeof handlers)[keyof typeof handlers] | undefined;
    if (!handler) return;
    // A batch is counted by its items, so its limit runs once the body is parsed and validated.
    if (isBatch(method, route.url)) route.preHandler = [...[route.preHandler ?? []].flat(), handler];
    else route.onRequest = [...[route.onRequest ?? []].flat(), handler];
  });
}

/** The shared counters' Redis client, closed with the scope. */
async function connectRedis(api: FastifyInstance, url: string, log: Logger): Promise<Redis> {
  // Fail fast at start-up on a bad REDIS_URL; later outages skip limiting (skipOnError) rather than fail requests.
  const redis = new Redis(url, {
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
    await redis.quit().catch(() => redis.disconnect());
  });
  return redis;
}

/** One hook per policy with a limit: the plugin's check, then the structured headers. */
function limitHandlers(api: FastifyInstance, limits: Record<RatePolicy, number>, refused: Map<string, number>) {
  const marks = new WeakMap<FastifyRequest, string>();
  let seq = 0;
  const handlers = {} as Record<RatePolicy, onRequestAsyncHookHandler>;
  for (const policy of ['submit', 'read', 'write'] as const) {
    const max = limits[policy];
    if (max <= 0) continue;
    const limit = api.rateLimit({
      max,
      timeWindow: WINDOW_MS,
      keyGenerator: (req) => {
        const weight = policy === 'submit' ? weightOf(req) : 1;
        if (weight === 1) return `${req.apiKeyId}:${policy}`;
        const mark = String(++seq);
        marks.set(req, mark);
        return `${req.apiKeyId}:${policy}${WEIGHT_MARK}${weight}${MARK_MARK}${mark}`;
      },
      errorResponseBuilder: (req, ctx) => {
        const after = Math.max(1, Math.ceil(ctx.ttl / 1000));
        const batch = isBatch(req.method, req.routeOptions.url ?? '');
        return new ApiError(
          429,
          batch
            ? `rate limit exceeded: ${ctx.max} submits per minute for this API key, and each item of a batch counts as one; this batch is over what is left; retry in ${after}s`
            : `rate limit exceeded: ${ctx.max} ${policy} requests per minute for this API key; retry in ${after}s`,
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
        const mark = marks.get(req);
        const left = mark === undefined ? undefined : refused.get(mark);
        if (left !== undefined) {
          refused.delete(mark!);
          reply.header('ratelimit-remaining', left);
        }
        structuredHeaders(reply, policy);
      }
    };
  }
  return handlers;
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
