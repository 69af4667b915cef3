/**
 * The one place webhook signatures are made (the dispatcher signs, verifyWebhook checks). Every
 * signed delivery carries two styles of headers over the same timestamp and raw body:
 *
 *   X-Service-Signature = lowercase hex( HMAC-SHA256( key = secret, message = timestamp + "." + rawBody ) )
 *   webhook-signature   = "v1," + base64( HMAC-SHA256( key = standardKey(secret), message = id + "." + timestamp + "." + rawBody ) )
 *
 * The second is Standard Webhooks' (standardwebhooks.com), so its libraries verify deliveries.
 * During a secret rotation it lists one `v1,` signature per live secret, space-separated.
 * Light on purpose: the package entry point (src/index.ts) pulls it in.
 */
import { createHmac } from 'node:crypto';

export const EVENT_ID_HEADER = 'x-service-event-id';
export const TIMESTAMP_HEADER = 'x-service-timestamp';
export const SIGNATURE_HEADER = 'x-service-signature';
export const STANDARD_ID_HEADER = 'webhook-id';
export const STANDARD_TIMESTAMP_HEADER = 'webhook-timestamp';
export const STANDARD_SIGNATURE_HEADER = 'webhook-signature';
export const WEBHOOK_USER_AGENT = 'media-jobs-webhooks/1';
/** The prefix of the secrets the service makes for owner endpoints (base64 key after it). */
export const SECRET_PREFIX = 'whsec_';

/** Lowercase hex HMAC-SHA256 of `${timestamp}.${rawBody}` under `secret` (the seed's signature). */
export function computeSignature(
  secret: string | Buffer,
  timestamp: number | string,
  rawBody: string | Buffer,
): string {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest('hex');
}

/**
 * Standard Webhooks' HMAC key for a secret: the base64 after `whsec_`, else the secret's UTF-8
 * bytes (so a plain secret `s` verifies with the libraries given `whsec_` + base64(s)).
 */
export function standardKey(secret: string): Buffer {
  return secret.startsWith(SECRET_PREFIX)
    ? Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64')
    : Buffer.from(secret, 'utf8');
}

/** Base64 HMAC-SHA256 of `${id}.${timestamp}.${rawBody}` (without the `v1,` version prefix). */
export function computeStandardSignature(
  secret: string,
  id: string,
  timestamp: number | string,
  rawBody: string | Buffer,
): string {
  return createHmac('sha256', standardKey(secret)).update(`${id}.${timestamp}.`).update(rawBody).digest('base64');
}

export interface DeliveryHeadersInput {
  eventId: string;
  /** Unix seconds; fresh for every attempt. */
  timestamp: number;
  body: string | Buffer;
  /** No signature headers without a secret. */
  secret: string | null | undefined;
  /** Secrets still honoured after a rotation: an extra `v1,` signature each in webhook-signature. */
  previousSecrets?: readonly string[];
}

/** Every header a delivery carries besides the transport's own (Content-Length, Host…). */
export function deliveryHeaders(d: DeliveryHeadersInput): Record<string, string> {
  const ts = String(d.timestamp);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': WEBHOOK_USER_AGENT,
    [EVENT_ID_HEADER]: d.eventId,
    [TIMESTAMP_HEADER]: ts,
  };
  if (!d.secret) return headers;
  headers[SIGNATURE_HEADER] = computeSignature(d.secret, ts, d.body);
  headers[STANDARD_ID_HEADER] = d.eventId;
  headers[STANDARD_TIMESTAMP_HEADER] = ts;
  headers[STANDARD_SIGNATURE_HEADER] = [d.secret, ...(d.previousSecrets ?? [])]
    .map((s) => `v1,${computeStandardSignature(s, d.eventId, ts, d.body)}`)
    .join(' ');
  return headers;
}
