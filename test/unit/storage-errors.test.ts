import { describe, expect, it } from 'vitest';
import { describeStorageError, isStorageFull, isStorageUnavailable } from '../../src/storage/errors.js';

// Shaped as the AWS SDK and node:fs throw them.
const sdk = (name: string, status?: number) =>
  Object.assign(new Error(name), { name, $metadata: status === undefined ? {} : { httpStatusCode: status } });
const sys = (code: string) => Object.assign(new Error(code), { code });

describe('result storage errors', () => {
  it.each([
    ['connection refused', sys('ECONNREFUSED'), 'result storage unavailable: ECONNREFUSED'],
    [
      'a reset inside the SDK error',
      Object.assign(new Error('x'), { cause: sys('ECONNRESET') }),
      'result storage unavailable: ECONNRESET',
    ],
    ['a 500', sdk('InternalError', 500), 'result storage unavailable: HTTP 500'],
    ['a 503 SlowDown', sdk('SlowDown', 503), 'result storage unavailable: HTTP 503'],
    ['a client-side timeout', sdk('TimeoutError'), 'result storage unavailable: TimeoutError'],
  ])('%s is an outage: wait and retry', (_what, err, words) => {
    expect(isStorageUnavailable(err)).toBe(true);
    expect(isStorageFull(err)).toBe(false);
    expect(describeStorageError(err)).toBe(words);
  });

  it.each([
    ['access denied', sdk('AccessDenied', 403)],
    ['no such bucket', sdk('NoSuchBucket', 404)],
    ['a bug', new TypeError('x is undefined')],
    ['permission denied on disk', sys('EACCES')],
  ])('%s is not an outage (an error, not a wait)', (_what, err) => {
    expect(isStorageUnavailable(err)).toBe(false);
    expect(isStorageFull(err)).toBe(false);
  });

  it('a full disk or quota is full, not an outage', () => {
    for (const code of ['ENOSPC', 'EDQUOT']) {
      expect(isStorageFull(sys(code))).toBe(true);
      expect(isStorageUnavailable(sys(code))).toBe(false);
      expect(describeStorageError(sys(code))).toBe('result storage is full (no space left on the results disk)');
    }
  });
});
