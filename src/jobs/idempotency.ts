import { createHash } from 'node:crypto';
import canonicalizeModule from 'canonicalize';
import { invalid } from '../errors.js';

// The package is CommonJS with an ESM-style d.ts: its module.exports is the function itself.
const canonicalize = canonicalizeModule as unknown as (input: unknown) => string | undefined;

/** 1 to 255 printable ASCII characters (docs/api.md, Idempotency). */
export function checkIdempotencyKey(key: string | undefined, field = 'Idempotency-Key'): string | undefined {
  if (key === undefined) return undefined;
  if (!/^[\x21-\x7e](?:[\x20-\x7e]{0,253}[\x21-\x7e])?$/.test(key)) {
    throw invalid(`${field}: must be 1 to 255 printable ASCII characters`);
  }
  return key;
}

/**
 * Method, path and the body in RFC 8785 canonical JSON: two requests that differ only in key
 * order or whitespace are the same request.
 */
export function requestFingerprint(method: string, path: string, body: unknown): string {
  const canonical = canonicalize(body ?? null) ?? 'null';
  return createHash('sha256').update(`${method.toUpperCase()} ${path}\n${canonical}`).digest('hex');
}
