import { describe, expect, it } from 'vitest';
import { checkIdempotencyKey, requestFingerprint } from '../../src/jobs/idempotency.js';

describe('request fingerprint (RFC 8785 canonical JSON)', () => {
  const p = '/api/v1/jobs/submit/image-transform';
  it('ignores key order and whitespace, at every depth', () => {
    const a = requestFingerprint('POST', p, { a: 1, b: { y: [1, { q: 2, p: 1 }], x: 'é' } });
    const b = requestFingerprint('post', p, JSON.parse('{ "b": {"x":"\\u00e9", "y":[1,{"p":1,"q":2}]}, "a": 1.0 }'));
    expect(a).toBe(b);
  });
  it('distinguishes values, array order, path and method', () => {
    const base = requestFingerprint('POST', p, { a: [1, 2] });
    expect(requestFingerprint('POST', p, { a: [2, 1] })).not.toBe(base);
    expect(requestFingerprint('POST', p, { a: [1, 2], b: null })).not.toBe(base);
    expect(requestFingerprint('POST', `${p}x`, { a: [1, 2] })).not.toBe(base);
    expect(requestFingerprint('PUT', p, { a: [1, 2] })).not.toBe(base);
    expect(requestFingerprint('POST', p, { a: ['1', 2] })).not.toBe(base);
  });
});

describe('Idempotency-Key syntax', () => {
  it.each([['a'], ['x'.repeat(255)], ['order 42/retry:1'], ['~!@#$%^&*()']])('accepts %j', (k) => {
    expect(checkIdempotencyKey(k)).toBe(k);
  });
  it.each([[''], ['x'.repeat(256)], ['tab\t'], ['é'], [' lead'], ['trail '], ['nul\u0000']])('rejects %j', (k) => {
    expect(() => checkIdempotencyKey(k)).toThrow('Idempotency-Key: must be 1 to 255 printable ASCII characters');
  });
  it('treats an absent key as no key', () => {
    expect(checkIdempotencyKey(undefined)).toBeUndefined();
  });
});
