import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Clock } from '../../clock.js';
import type { Operator } from '../../operator.js';
import { ApiError } from '../api-error.js';
import { ok } from '../envelope.js';
import { zodApp, type ZodApp } from '../zod-app.js';
import { lastHour, minuteSeries } from './throughput.js';

/** A worker pool running inside this process. */
export interface LocalWorkerInfo {
  id: string;
  concurrency: number;
  active_jobs: number;
  job_types: string[];
}

export interface AdminDeps {
  operator: Operator;
  clock: Clock;
  /** The worker pools of this process (none in an `api`-role process). */
  localWorkers?: () => LocalWorkerInfo[];
}

const CHALLENGE = { 'www-authenticate': 'Bearer realm="media-jobs-admin"' };
const FAILED_LIMIT = 50;

/** Admin tokens only (`media-jobs admin create-token`); API keys are not accepted here. */
function adminAuth(deps: AdminDeps) {
  return async (request: FastifyRequest) => {
    const m = /^Bearer +(mja_[A-Za-z0-9_-]{1,100})\s*$/i.exec(request.headers.authorization ?? '');
    if (!m)
      throw new ApiError(
        401,
        'an admin token is required: "Authorization: Bearer mja_…" (media-jobs admin create-token)',
        CHALLENGE,
      );
    if (!(await deps.operator.isAdmin(m[1]!))) throw new ApiError(401, 'invalid or revoked admin token', CHALLENGE);
  };
}

const iso = (ms: number | null | undefined) => (ms === null || ms === undefined ? null : new Date(ms).toISOString());
const createKeyBody = z.strictObject({ owner: z.string().trim().min(1).max(200) });
const keyParams = z.object({ id: z.string().min(1).max(100) });
// Not part of the public API: left out of the OpenAPI document.
const hidden = { hide: true };

/**
 * /admin/api/…: the operator's routes, in their own scope with their own auth hook (no API-key
 * hook, no per-key rate limits). Same envelope as the public API.
 */
export async function adminRoutes(scope: FastifyInstance, deps: AdminDeps): Promise<void> {
  const app = zodApp(scope);
  app.addHook('onRequest', adminAuth(deps));
  // Operator answers are never cached by a browser or a proxy.
  app.addHook('onSend', async (_request, reply) => {
    reply.header('cache-control', 'no-store');
  });
  overviewRoute(app, deps);
  workersRoute(app, deps);
  keyRoutes(app, deps.operator);
  deliveryProblemRoutes(app, deps.operator);
}

/** GET /overview: queue depth and the last hour's throughput. */
function overviewRoute(app: ZodApp, deps: AdminDeps): void {
  app.get('/overview', { schema: hidden }, async () => {
    // Both from database counters: the whole cluster, whichever process answers.
    const now = deps.clock.now();
    const [depth, perMinute] = await Promise.all([
      deps.operator.queueDepth(),
      deps.operator.finishedPerMinute(...lastHour(now)),
    ]);
    const series = minuteSeries(perMinute, now);
    return ok({
      queue: depth,
      throughput: {
        per_minute: series,
        finished_last_hour: series.reduce((n, p) => n + p.finished, 0),
      },
    });
  });
}

/** GET /workers: this process's pools and the remote workers (from their tokens). */
function workersRoute(app: ZodApp, deps: AdminDeps): void {
  app.get('/workers', { schema: hidden }, async () =>
    ok({
      local: deps.localWorkers?.() ?? [],
      remote: (await deps.operator.remoteWorkers()).map((w) => ({
        ...w,
        created_at: iso(w.created_at),
        revoked_at: iso(w.revoked_at),
        last_seen_at: iso(w.last_seen_at),
      })),
    }),
  );
}

/** GET and POST /keys, POST /keys/:id/revoke: the API keys (a new key's secret is shown once). */
function keyRoutes(app: ZodApp, operator: Operator): void {
  app.get('/keys', { schema: hidden }, async () => {
    const keys = await operator.listKeys();
    return ok({
      keys: keys.map((k) => ({
        id: k.id,
        owner: k.owner,
        prefix: k.prefix,
        created_at: iso(k.created_at),
        revoked_at: iso(k.revoked_at),
      })),
    });
  });

  app.post('/keys', { schema: { ...hidden, body: createKeyBody } }, async (request) => {
    const { owner } = request.body;
    const k = await operator.createKey(owner);
    return ok({ id: k.id, owner: k.owner, prefix: k.prefix, key: k.key });
  });

  app.post('/keys/:id/revoke', { schema: { ...hidden, params: keyParams } }, async (request) => {
    const { id } = request.params;
    if (!(await operator.revokeKey(id))) throw new ApiError(404, 'no active key with this id');
    return ok({ id, revoked: true });
  });
}

/** GET /failed-deliveries and /webhook-endpoints/disabled: what needs an operator's look. */
function deliveryProblemRoutes(app: ZodApp, operator: Operator): void {
  app.get('/failed-deliveries', { schema: hidden }, async () => {
    const rows = await operator.failedDeliveries(FAILED_LIMIT);
    return ok({ deliveries: rows.map((r) => ({ ...r, failed_at: iso(r.failed_at) })), limit: FAILED_LIMIT });
  });

  // The operator event of a disabled endpoint, for the dashboard (no secrets).
  app.get('/webhook-endpoints/disabled', { schema: hidden }, async () => {
    const rows = await operator.disabledEndpoints(FAILED_LIMIT);
    return ok({
      endpoints: rows.map((e) => ({
        id: e.id,
        owner: e.owner,
        url: e.url,
        disabled_reason: e.disabled_reason,
        disabled_at: iso(e.disabled_at),
      })),
    });
  });
}
