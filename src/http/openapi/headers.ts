import { ref } from './json.js';

/**
 * The document's headers: the request headers the routes read (components/parameters), the
 * response headers (components/headers), and the sets sent with every answer.
 */

/** components/parameters: the request headers shared by several operations. */
export const headerParameters = () => ({
  'Idempotency-Key': {
    name: 'Idempotency-Key',
    in: 'header',
    required: false,
    description: "1 to 255 printable ASCII characters, e.g. a UUID. Kept 24 hours; scoped to the API key's owner.",
    schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7E]+$' },
  },
  'X-Request-Id': {
    name: 'X-Request-Id',
    in: 'header',
    required: false,
    description: 'Your id for this request (1–128 of `A-Za-z0-9._:@/+=-`); echoed back, else one is made.',
    schema: { type: 'string', maxLength: 128 },
  },
});

/** components/headers: what the answers carry. */
export const responseHeaders = () => ({
  'X-Request-Id': {
    description: "The request id (echoed or generated). On an idempotent replay, the original request's id.",
    schema: { type: 'string' },
  },
  'Idempotent-Replayed': {
    description: '`true` when this is the stored response of an earlier request with the same Idempotency-Key.',
    schema: { type: 'string', enum: ['true'] },
  },
  'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer', minimum: 0 } },
  RateLimit: {
    description:
      'What is left of the current window (IETF RateLimit header fields), when rate limiting is on: `"<policy>";r=<remaining>;t=<seconds to reset>`, e.g. `"submit";r=57;t=42`. Policies: `submit`, `read`, `write`; limits are per API key.',
    schema: { type: 'string' },
  },
  'RateLimit-Policy': {
    description:
      'The quota (IETF RateLimit header fields), when rate limiting is on: `"<policy>";q=<requests>;w=<window seconds>`, e.g. `"submit";q=60;w=60`.',
    schema: { type: 'string' },
  },
  'RateLimit-Limit': {
    description: 'Requests per window of the policy that counted this request (the older IETF draft field).',
    schema: { type: 'integer', minimum: 0 },
  },
  'RateLimit-Remaining': {
    description:
      'What is left of the window (the older IETF draft field). A batch refused for being over what is left says what is left.',
    schema: { type: 'integer', minimum: 0 },
  },
  'RateLimit-Reset': {
    description: 'Seconds until the window resets (the older IETF draft field).',
    schema: { type: 'integer', minimum: 0 },
  },
});

/** Rate-limit headers: on every answer to a request with a valid API key, when limits are on. */
export const RATE_LIMIT_HEADERS = Object.fromEntries(
  ['RateLimit', 'RateLimit-Policy', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'].map((h) => [
    h,
    ref('headers', h),
  ]),
);

/** Headers on every success of an authenticated route. */
export const SUCCESS_HEADERS = { 'X-Request-Id': ref('headers', 'X-Request-Id'), ...RATE_LIMIT_HEADERS };
