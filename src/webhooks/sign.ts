/**
 * The one place webhook signatures are made (the dispatcher signs, verifyWebhook checks).
 *
 *   X-Service-Signature = lowercase hex( HMAC-SHA256( key = secret, message = timestamp + "." + rawBody ) )
 *
 * `timestamp` is the X-Service-Timestamp value (Unix seconds, as sent) and `rawBody` the exact
 * bytes of the request body. Light on purpose: the package entry point (src/index.ts) pulls it in.
 */
import { createHmac } from 'node:crypto';

export const EVENT_ID_HEADER = 'x-service-event-id';
export const TIMESTAMP_HEADER = 'x-service-timestamp';
export const SIGNATURE_HEADER = 'x-service-signature';
export const WEBHOOK_USER_AGENT = 'media-jobs-webhooks/1';

/** Lowercase hex HMAC-SHA256 of `${timestamp}.${rawBody}` under `secret`. */
export function computeSignature(
  secret: string | Buffer,
  timestamp: number | string,
  rawBody: string | Buffer,
): string {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest('hex');
}

export interface DeliveryHeadersInput {
  eventId: string;
  /** Unix seconds; fresh for every attempt. */
  timestamp: number;
  body: string | Buffer;
  /** No signature header without a secret. */
  secret: string | null | undefined;
}

/** Every header a delivery carries besides the transport's own (Content-Length, Host…). */
export function deliveryHeaders(d: DeliveryHeadersInput): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': WEBHOOK_USER_AGENT,
    [EVENT_ID_HEADER]: d.eventId,
    [TIMESTAMP_HEADER]: String(d.timestamp),
  };
  if (d.secret) headers[SIGNATURE_HEADER] = computeSignature(d.secret, d.timestamp, d.body);
  return headers;
}
