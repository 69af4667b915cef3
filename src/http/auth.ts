import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from './api-error.js';
import type { KeyCache } from './key-cache.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The owner of the API key that made the request (set by the auth hook). */
    owner: string;
    /** The id of that key (rate limits are per key). */
    apiKeyId: string;
  }
}

const CHALLENGE = { 'www-authenticate': 'Bearer realm="media-jobs"' };
const BEARER_RE = /^Bearer +([\x21-\x7e]{1,200})\s*$/i;

/** Bearer API keys; missing, malformed, unknown and revoked keys all get 401. */
export function authHook(keys: KeyCache) {
  return async (request: FastifyRequest, _reply: FastifyReply) => {
    const header = request.headers.authorization;
    if (!header)
      throw new ApiError(401, 'missing Authorization header: use "Authorization: Bearer <API key>"', CHALLENGE);
    const m = BEARER_RE.exec(header);
    if (!m) throw new ApiError(401, 'malformed Authorization header: use "Authorization: Bearer <API key>"', CHALLENGE);
    if (m[1]!.startsWith('mjw_'))
      throw new ApiError(401, 'a worker token opens only /api/v1/worker routes: use an API key here', CHALLENGE);
    const key = await keys.lookup(m[1]!);
    if (key === undefined) throw new ApiError(401, 'invalid or revoked API key', CHALLENGE);
    request.owner = key.owner;
    request.apiKeyId = key.id;
  };
}
