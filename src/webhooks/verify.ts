/**
 * Receiver-side verification of a media-jobs webhook (exported from the package entry point).
 *
 *   const event = verifyWebhook(rawBody, req.headers, process.env.WEBHOOK_SECRET!);
 *
 * Checks, in order: the headers are present, the signature matches the raw body (constant-time
 * comparison), the timestamp is within `toleranceSeconds` of now (replay protection), and the
 * body is a JSON object. Returns the parsed payload; throws WebhookVerificationError otherwise.
 */
import { timingSafeEqual } from 'node:crypto';
import type { WebhookPayload } from './events.js';
import { computeSignature, EVENT_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER } from './sign.js';

export type { WebhookPayload };

export type WebhookVerificationReason =
  | 'missing_header'
  | 'invalid_timestamp'
  | 'timestamp_too_old'
  | 'timestamp_in_future'
  | 'invalid_signature'
  | 'invalid_payload';

/** Thrown by verifyWebhook; `reason` is stable for code, `message` is for people. */
export class WebhookVerificationError extends Error {
  constructor(
    readonly reason: WebhookVerificationReason,
    message: string,
  ) {
    super(message);
    this.name = 'WebhookVerificationError';
  }
}

export interface VerifyWebhookOptions {
  /** How far X-Service-Timestamp may be from now, either way; default 300 (5 minutes). */
  toleranceSeconds?: number;
  /** "Now" for the tolerance check: a Date or Unix milliseconds (as Date.now()); default the system clock. */
  now?: Date | number;
}

/** Node's IncomingHttpHeaders, a plain object in any letter case, or a fetch Headers. */
export type WebhookHeaders = Record<string, string | string[] | undefined> | Headers;

const DEFAULT_TOLERANCE_SECONDS = 300;
const HEX_SHA256 = /^[0-9a-f]{64}$/i;

function headerValue(headers: WebhookHeaders, name: string): string | undefined {
  let v: string | string[] | null | undefined;
  if (typeof (headers as Headers).get === 'function' && typeof (headers as Headers).has === 'function') {
    v = (headers as Headers).get(name);
  } else {
    const rec = headers as Record<string, string | string[] | undefined>;
    v = rec[name];
    if (v === undefined) {
      const key = Object.keys(rec).find((k) => k.toLowerCase() === name);
      if (key !== undefined) v = rec[key];
    }
  }
  if (Array.isArray(v)) v = v[0];
  if (v === null || v === undefined) return undefined;
  const trimmed = v.trim();
  return trimmed === '' ? undefined : trimmed;
}

function required(headers: WebhookHeaders, name: string): string {
  const v = headerValue(headers, name);
  if (v === undefined) throw new WebhookVerificationError('missing_header', `missing ${name} header`);
  return v;
}

/**
 * Verifies a delivery and returns its payload. `rawBody` must be the body exactly as received
 * (a string or Buffer, before any JSON parsing); `headers` the request's headers.
 */
export function verifyWebhook(
  rawBody: string | Buffer,
  headers: WebhookHeaders,
  secret: string,
  options: VerifyWebhookOptions = {},
): WebhookPayload {
  if (typeof secret !== 'string' || secret === '')
    throw new TypeError('verifyWebhook: secret must be a non-empty string');
  if (typeof rawBody !== 'string' && !Buffer.isBuffer(rawBody)) {
    throw new TypeError('verifyWebhook: rawBody must be the raw request body as a string or Buffer, not parsed JSON');
  }
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;

  const eventId = required(headers, EVENT_ID_HEADER);
  const timestamp = required(headers, TIMESTAMP_HEADER);
  const signature = required(headers, SIGNATURE_HEADER);
  if (!/^\d{1,15}$/.test(timestamp)) {
    throw new WebhookVerificationError(
      'invalid_timestamp',
      `${TIMESTAMP_HEADER} must be Unix seconds (got "${timestamp.slice(0, 32)}")`,
    );
  }

  const expected = Buffer.from(computeSignature(secret, timestamp, rawBody), 'hex');
  const given = HEX_SHA256.test(signature) ? Buffer.from(signature, 'hex') : undefined;
  if (!given || !timingSafeEqual(expected, given)) {
    throw new WebhookVerificationError('invalid_signature', 'signature does not match the body, timestamp and secret');
  }

  const nowMs =
    options.now === undefined ? Date.now() : options.now instanceof Date ? options.now.getTime() : options.now;
  const skew = Math.floor(nowMs / 1000) - Number(timestamp);
  if (skew > tolerance) {
    throw new WebhookVerificationError(
      'timestamp_too_old',
      `timestamp is ${skew}s old, more than the ${tolerance}s tolerance (a replay?)`,
    );
  }
  if (-skew > tolerance) {
    throw new WebhookVerificationError(
      'timestamp_in_future',
      `timestamp is ${-skew}s in the future, more than the ${tolerance}s tolerance (check the clock)`,
    );
  }

  let payload: unknown;
  try {
    payload = JSON.parse(typeof rawBody === 'string' ? rawBody : rawBody.toString('utf8'));
  } catch {
    throw new WebhookVerificationError('invalid_payload', 'body is not valid JSON');
  }
  if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) {
    throw new WebhookVerificationError('invalid_payload', 'body is not a JSON object');
  }
  // The header is not signed; the body is. They must agree, so deduplicating on either is safe.
  if ((payload as { event_id?: unknown }).event_id !== eventId) {
    throw new WebhookVerificationError('invalid_payload', `${EVENT_ID_HEADER} does not match the payload's event_id`);
  }
  return payload as WebhookPayload;
}
