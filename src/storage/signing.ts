import { createHmac, timingSafeEqual } from 'node:crypto';

/** HMAC-SHA256 over the object key and its expiry; base64url, no padding. */
export function signResultPath(secret: string, key: string, expiresUnix: number): string {
  return createHmac('sha256', secret).update(`${key}\n${expiresUnix}`).digest('base64url');
}

export type SignatureCheck = 'ok' | 'invalid' | 'expired';

/** Constant-time check; a bad signature is reported before expiry so probing learns nothing. */
export function verifyResultPath(
  secret: string,
  key: string,
  expires: unknown,
  signature: unknown,
  nowMs: number,
): SignatureCheck {
  if (typeof expires !== 'string' || !/^\d{1,12}$/.test(expires) || typeof signature !== 'string') return 'invalid';
  const expected = Buffer.from(signResultPath(secret, key, Number(expires)));
  const given = Buffer.from(signature);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return 'invalid';
  return Number(expires) * 1000 <= nowMs ? 'expired' : 'ok';
}
