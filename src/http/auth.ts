import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { ApiError } from './api-error.js';
import type { KeyCache, KeyOwner } from './key-cache.js';

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

const INVALID = () => new ApiError(401, 'invalid or revoked API key', CHALLENGE);

/**
 * Bearer API keys; missing, malformed, unknown and revoked keys all get 401. A callback hook that
 * answers a cached key synchronously (no promise on the hot path); a miss asks the database.
 */
export function authHook(keys: KeyCache) {
  const accept = (request: FastifyRequest, key: KeyOwner | null | undefined, done: HookHandlerDoneFunction) => {
    if (!key) {
      done(INVALID());
      return;
    }
    request.owner = key.owner;
    request.apiKeyId = key.id;
    done();
  };
  return (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    const header = request.headers.authorization;
    if (!header) {
      done(new ApiError(401, 'missing Authorization header: use "Authorization: Bearer <API key>"', CHALLENGE));
      return;
    }
    const m = BEARER_RE.exec(header);
    if (!m) {
      done(new ApiError(401, 'malformed Authorization header: use "Authorization: Bearer <API key>"', CHALLENGE));
      return;
    }
    const token = m[1]!;
    if (token.startsWith('mjw_')) {
      done(new ApiError(401, 'a worker token opens only /api/v1/worker routes: use an API key here', CHALLENGE));
      return;
    }
    const known = keys.known(token);
    if (known !== undefined) {
      accept(request, known, done);
      return;
    }
    keys.lookup(token).then((key) => {
      accept(request, key, done);
    }, done);
  };
}
