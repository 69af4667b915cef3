import { ref, type Json } from './json.js';
import { RATE_LIMIT_HEADERS } from './headers.js';

/** The documented error answers (components/responses): when each is given, with an example. */

interface ErrorSpec {
  status: number;
  name: string;
  description: string;
  example: string;
}

const ERRORS: ErrorSpec[] = [
  {
    status: 400,
    name: 'BadRequest',
    description: 'The request is invalid: the message names the field.',
    example: 'input.source: must be a public http or https URL (host resolves to a private address)',
  },
  {
    status: 401,
    name: 'Unauthorized',
    description: 'Missing, malformed, unknown or revoked API key.',
    example: 'invalid or revoked API key',
  },
  {
    status: 403,
    name: 'Forbidden',
    description: 'The signed result URL is invalid or has expired.',
    example: 'result URL has expired; fetch a new one from GET /api/v1/jobs/{uuid}/result',
  },
  {
    status: 404,
    name: 'NotFound',
    description: "The job (or job type, or event) does not exist or is not the caller's: both answer the same.",
    example: 'job not found',
  },
  {
    status: 409,
    name: 'Conflict',
    description:
      'Idempotency-Key reused with a different body; cancel of a terminal job; result not ready or never will be.',
    example: 'job is already completed; only queued or processing jobs can be cancelled',
  },
  {
    status: 410,
    name: 'Gone',
    description: 'The result was deleted at the end of its retention period.',
    example: 'result was deleted at the end of its retention period',
  },
  {
    status: 413,
    name: 'PayloadTooLarge',
    description: 'The body is larger than the limit (MAX_BODY_BYTES).',
    example: 'body is larger than 1048576 bytes',
  },
  {
    status: 414,
    name: 'UriTooLong',
    description: 'A path segment (such as a job uuid) is longer than the router takes (100 characters).',
    example: 'a path segment is too long',
  },
  {
    status: 415,
    name: 'UnsupportedMediaType',
    description:
      'A write route got a body that is not JSON, or a compressed one (Content-Encoding other than identity).',
    example: 'Content-Type must be application/json',
  },
  {
    status: 429,
    name: 'TooManyRequests',
    description: 'Rate limited: retry after the number of seconds in `Retry-After`.',
    example: 'rate limit exceeded: 60 submit requests per minute for this API key; retry in 42s',
  },
  {
    status: 500,
    name: 'InternalError',
    description: 'Anything unexpected. No stack trace is returned; quote X-Request-Id when reporting it.',
    example: 'internal error',
  },
  {
    status: 503,
    name: 'ServiceUnavailable',
    description:
      'Not ready: the database is not reachable or its migrations are not applied, or the process is shutting down.',
    example: 'database is not reachable',
  },
];

export function errorResponses(): Record<string, Json> {
  const out: Record<string, Json> = {};
  for (const e of ERRORS) {
    const headers: Json = { 'X-Request-Id': ref('headers', 'X-Request-Id') };
    if (e.status === 401)
      headers['WWW-Authenticate'] = { description: 'Bearer challenge.', schema: { type: 'string' } };
    if (e.status === 429) headers['Retry-After'] = ref('headers', 'Retry-After');
    // Sent on every answer to a request with a valid API key (so not on 401, nor on result downloads).
    if (e.status !== 401 && e.status !== 403) Object.assign(headers, RATE_LIMIT_HEADERS);
    out[e.name] = {
      description: `${e.status}: ${e.description}`,
      headers,
      content: {
        'application/json': {
          schema: ref('schemas', 'ErrorEnvelope'),
          example: { code: -1, message: e.example, data: {} },
        },
      },
    };
  }
  return out;
}
