/**
 * Receiver-side verification of a media-jobs webhook (exported from the package entry point).
 *
 *   const event = verifyWebhook(rawBody, req.headers, process.env.WEBHOOK_SECRET!);
 *
 * Checks, in order: the headers are present, a signature matches the raw body (constant-time
 * comparison), the timestamp is within `toleranceSeconds` of now (replay protection), and the
 * body is a JSON object. Returns the parsed payload; throws WebhookVerificationError otherwise.
 * Either header style is accepted (X-Service-* or Standard Webhooks' webhook-*), each with
 * several space-separated signatures, and several secrets (the old and the new, while rotating).
 */
import { timingSafeEqual } from 'node:crypto';
import type { WebhookPayload } from './events.js';
import {
  computeSignature,
  computeStandardSignature,
  EVENT_ID_HEADER,
  SIGNATURE_HEADER,
  STANDARD_ID_HEADER,
  STANDARD_SIGNATURE_HEADER,
  STANDARD_TIMESTAMP_HEADER,
  TIMESTAMP_HEADER,
} from './sign.js';

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

/** The first of `names` present (the X-Service-* name, then the Standard Webhooks one). */
function required(headers: WebhookHeaders, ...names: string[]): string {
  for (const name of names) {
    const v = headerValue(headers, name);
    if (v !== undefined) return v;
  }
  throw new WebhookVerificationError('missing_header', `missing ${names.join(' or ')} header`);
}

const sameBytes = (a: Buffer, b: Buffer) => a.length === b.length && timingSafeEqual(a, b);

/** True when any signature of either header matches under any of the secrets. */
function signatureMatches(
  headers: WebhookHeaders,
  secrets: readonly string[],
  id: string,
  timestamp: string,
  rawBody: string | Buffer,
): boolean {
  const hex = (headerValue(headers, SIGNATURE_HEADER) ?? '').split(/\s+/).filter((s) => HEX_SHA256.test(s));
  const standard = (headerValue(headers, STANDARD_SIGNATURE_HEADER) ?? '')
    .split(/\s+/)
    .flatMap((s) => (s.startsWith('v1,') ? [Buffer.from(s.slice(3), 'base64')] : []));
  for (const secret of secrets) {
    if (hex.length > 0) {
      const expected = Buffer.from(computeSignature(secret, timestamp, rawBody), 'hex');
      if (hex.some((h) => sameBytes(expected, Buffer.from(h, 'hex')))) return true;
    }
    if (standard.length > 0) {
      const expected = Buffer.from(computeStandardSignature(secret, id, timestamp, rawBody), 'base64');
      if (standard.some((given) => sameBytes(expected, given))) return true;
    }
  }
  return false;
}

/**
 * Verifies a delivery and returns its payload. `rawBody` must be the body exactly as received
 * (a string or Buffer, before any JSON parsing); `headers` the request's headers.
 */
export function verifyWebhook(
  rawBody: string | Buffer,
  headers: WebhookHeaders,
  secret: string | readonly string[],
  options: VerifyWebhookOptions = {},
): WebhookPayload {
  const secrets = typeof secret === 'string' ? [secret] : [...secret];
  if (secrets.length === 0 || secrets.some((s) => typeof s !== 'string' || s === ''))
    throw new TypeError('verifyWebhook: secret must be a non-empty string (or a list of them)');
  if (typeof rawBody !== 'string' && !Buffer.isBuffer(rawBody)) {
    throw new TypeError('verifyWebhook: rawBody must be the raw request body as a string or Buffer, not parsed JSON');
  }
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;

  const eventId = required(headers, EVENT_ID_HEADER, STANDARD_ID_HEADER);
  const timestamp = required(headers, TIMESTAMP_HEADER, STANDARD_TIMESTAMP_HEADER);
  required(headers, SIGNATURE_HEADER, STANDARD_SIGNATURE_HEADER);
  if (!/^\d{1,15}$/.test(timestamp)) {
    throw new WebhookVerificationError(
      'invalid_timestamp',
      `${TIMESTAMP_HEADER} must be Unix seconds (got "${timestamp.slice(0, 32)}")`,
    );
  }

  if (!signatureMatches(headers, secrets, eventId, timestamp, rawBody)) {
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
