import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { signResultPath, verifyResultPath } from '../../src/storage/signing.js';

describe('result URL signatures', () => {
  const secret = 'test-secret';
  const key = '3b241101-e2bb-4255-8caf-4136c566a962.1.webp';

  it('matches an HMAC computed outside the code (openssl)', () => {
    const hex = execFileSync('openssl', ['dgst', '-sha256', '-hmac', secret, '-r'], { input: `${key}\n1800000000` })
      .toString()
      .split(' ')[0]!;
    expect(signResultPath(secret, key, 1800000000)).toBe(Buffer.from(hex, 'hex').toString('base64url'));
  });

  it('accepts a valid, unexpired signature', () => {
    const sig = signResultPath(secret, key, 2000);
    expect(verifyResultPath(secret, key, '2000', sig, 1_999_000)).toBe('ok');
  });

  it('rejects expiry, tampering and junk', () => {
    const sig = signResultPath(secret, key, 2000);
    expect(verifyResultPath(secret, key, '2000', sig, 2_000_000)).toBe('expired');
    expect(verifyResultPath(secret, key, '2001', sig, 0)).toBe('invalid');
    expect(verifyResultPath(secret, key.replace('webp', 'png'), '2000', sig, 0)).toBe('invalid');
    expect(verifyResultPath('other', key, '2000', sig, 0)).toBe('invalid');
    expect(verifyResultPath(secret, key, '2000', `${sig}x`, 0)).toBe('invalid');
    expect(verifyResultPath(secret, key, '2e3', sig, 0)).toBe('invalid');
    expect(verifyResultPath(secret, key, ['2000'], sig, 0)).toBe('invalid');
    expect(verifyResultPath(secret, key, undefined, undefined, 0)).toBe('invalid');
  });
});
