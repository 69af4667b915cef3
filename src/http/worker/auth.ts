import type { FastifyRequest } from 'fastify';
import type { Clock } from '../../clock.js';
import type { Store } from '../../store/store.js';
import {
  findActiveWorkerToken,
  touchWorkerToken,
  WORKER_TOKEN_PREFIX,
  type WorkerToken,
} from '../../store/worker-tokens.js';
import { ApiError } from '../api-error.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The worker token that made a /api/v1/worker request (set by its auth hook). */
    workerToken: WorkerToken;
  }
}

const CHALLENGE = { 'www-authenticate': 'Bearer realm="media-jobs-worker"' };
const TOKEN_RE = new RegExp(`^Bearer +(${WORKER_TOKEN_PREFIX}[A-Za-z0-9_-]{1,100})\\s*$`, 'i');
/** last_seen_at is written at most this often per token and process: no write per heartbeat. */
const TOUCH_EVERY_MS = 10_000;

/** The worker token of an Authorization header, or a 401 that says what is expected. */
function tokenOf(header: string | undefined): string {
  if (!header)
    throw new ApiError(
      401,
      'missing Authorization header: use "Authorization: Bearer mjw_…" (a worker token from media-jobs workers create-token)',
      CHALLENGE,
    );
  const m = TOKEN_RE.exec(header);
  if (!m)
    throw new ApiError(
      401,
      'a worker token is required here: "Authorization: Bearer mjw_…" (API keys are not accepted on worker routes)',
      CHALLENGE,
    );
  return m[1]!;
}

/**
 * The onRequest hook of the worker scope: worker tokens only (API keys are refused here, and
 * worker tokens everywhere else); sets request.workerToken and notes when the token was last seen.
 */
export function workerAuth(deps: { store: Store; clock: Clock }) {
  const touched = new Map<string, number>();
  return async (request: FastifyRequest) => {
    const token = await findActiveWorkerToken(deps.store.db, tokenOf(request.headers.authorization));
    if (!token) throw new ApiError(401, 'invalid or revoked worker token', CHALLENGE);
    request.workerToken = token;
    const now = deps.clock.now();
    if (now - (touched.get(token.id) ?? 0) >= TOUCH_EVERY_MS) {
      touched.set(token.id, now);
      // Bookkeeping only: a failure here must not fail the worker's call.
      touchWorkerToken(deps.store.db, token.id, now).catch(() => touched.delete(token.id));
    }
  };
}
