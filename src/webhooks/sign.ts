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
import { createHash, createHmac, hash } from 'node:crypto';

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

/**
 * Every header a delivery carries besides the transport's own (Content-Length, Host…): the
 * sender's signedDeliveryHeaders with the keys made for this one call.
 */
export function deliveryHeaders(d: DeliveryHeadersInput): Record<string, string> {
  return signedDeliveryHeaders(
    d.eventId,
    d.timestamp,
    Buffer.from(d.body),
    d.secret ? new SecretKeys(d.secret) : undefined,
    (d.previousSecrets ?? []).map((s) => new SecretKeys(s)),
  );
}

/** SHA-256's block size: an HMAC key is padded (or first hashed) to this many bytes. */
const BLOCK = 64;
/** Where each HMAC message is assembled (one thread, never two at once): grown to the largest body. */
let scratch = Buffer.allocUnsafeSlow(4_096);

/**
 * HMAC-SHA256 under one key, its two padded key blocks made once (RFC 2104: H(K^opad, H(K^ipad,
 * message))): signing is then two one-shot hashes into a reused buffer, about half what createHmac
 * costs for a delivery's body (a Hmac object, the key's setup and two native calls per update).
 */
export class HmacKey {
  private readonly inner: Buffer;
  /** The outer block, then room for the inner digest. */
  private readonly outer: Buffer;

  constructor(key: Buffer) {
    const k = key.length > BLOCK ? createHash('sha256').update(key).digest() : key;
    this.inner = Buffer.alloc(BLOCK, 0x36);
    this.outer = Buffer.alloc(BLOCK + 32, 0);
    this.outer.fill(0x5c, 0, BLOCK);
    for (let i = 0; i < k.length; i++) {
      this.inner[i]! ^= k[i]!;
      this.outer[i]! ^= k[i]!;
    }
  }

  /** The HMAC of `prefix` (UTF-8) followed by `body`. */
  sign(prefix: string, body: Buffer, encoding: 'hex' | 'base64'): string {
    const need = BLOCK + Buffer.byteLength(prefix) + body.length;
    if (scratch.length < need) scratch = Buffer.allocUnsafeSlow(Math.max(need, 2 * scratch.length));
    this.inner.copy(scratch, 0);
    const n = BLOCK + scratch.write(prefix, BLOCK, 'utf8');
    body.copy(scratch, n);
    // 'binary' (latin1): the digest's 32 bytes as a string, written back byte for byte (a Buffer
    // result costs twice as much).
    this.outer.write(hash('sha256', scratch.subarray(0, n + body.length), 'binary'), BLOCK, 'latin1');
    return hash('sha256', this.outer, encoding);
  }
}

/** A secret's two keys (the seed's and Standard Webhooks'), made once for all its deliveries. */
export class SecretKeys {
  readonly seed: HmacKey;
  readonly standard: HmacKey;

  constructor(readonly secret: string) {
    this.seed = new HmacKey(Buffer.from(secret, 'utf8'));
    this.standard = new HmacKey(standardKey(secret));
  }
}

/**
 * Every header a delivery carries besides the transport's own, with each secret's keys made
 * beforehand (the sender keeps them per secret).
 */
export function signedDeliveryHeaders(
  eventId: string,
  timestamp: number,
  body: Buffer,
  keys: SecretKeys | undefined,
  previous: readonly SecretKeys[] = [],
): Record<string, string> {
  const ts = String(timestamp);
  // Literal names (the constants above, spelled out): an object literal of fixed keys is built from
  // one template, where computed keys are defined one by one.
  if (!keys)
    return {
      'content-type': 'application/json',
      'user-agent': WEBHOOK_USER_AGENT,
      'x-service-event-id': eventId,
      'x-service-timestamp': ts,
    };
  const standardPrefix = `${eventId}.${ts}.`;
  let standard = `v1,${keys.standard.sign(standardPrefix, body, 'base64')}`;
  for (const p of previous) standard += ` v1,${p.standard.sign(standardPrefix, body, 'base64')}`;
  return {
    'content-type': 'application/json',
    'user-agent': WEBHOOK_USER_AGENT,
    'x-service-event-id': eventId,
    'x-service-timestamp': ts,
    'x-service-signature': keys.seed.sign(`${ts}.`, body, 'hex'),
    'webhook-id': eventId,
    'webhook-timestamp': ts,
    'webhook-signature': standard,
  };
}
