import { execFileSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { computeSignature, verifyWebhook, WebhookVerificationError } from '../../src/index.js';
import {
  computeStandardSignature,
  deliveryHeaders,
  EVENT_ID_HEADER,
  SecretKeys,
  SIGNATURE_HEADER,
  signedDeliveryHeaders,
  STANDARD_ID_HEADER,
  STANDARD_SIGNATURE_HEADER,
  STANDARD_TIMESTAMP_HEADER,
  TIMESTAMP_HEADER,
  WEBHOOK_USER_AGENT,
} from '../../src/webhooks/sign.js';

/** HMAC-SHA256 computed outside our code: openssl over `timestamp.body`, body passed on stdin. */
function opensslSignature(secret: string, timestamp: number | string, body: string): string {
  const out = execFileSync('openssl', ['dgst', '-sha256', '-hmac', secret], {
    input: `${timestamp}.${body}`,
  }).toString();
  // "SHA2-256(stdin)= <hex>" (OpenSSL 3) or "(stdin)= <hex>" (1.1)
  return /=\s*([0-9a-f]{64})\s*$/.exec(out)![1]!;
}

const secret = 'whsec_test_secret';
const payload = {
  event_id: '3f1c2a9e-8b7d-4e6f-9a1b-2c3d4e5f6a7b',
  event_type: 'job.completed',
  occurred_at: '2023-11-14T22:13:20.000Z',
  job: {
    uuid: '0b7e5a52-1c1f-4a8e-9f61-1f0a3c5d7e90',
    status: 'completed',
    status_detail: 'done',
    error_message: null,
    error_type: null,
    result_ready: true,
  },
};
const body = JSON.stringify(payload);
const ts = 1_700_000_000;
const now = new Date(ts * 1000);

/** The seed's headers alone (X-Service-*): the Standard Webhooks ones are tested on their own below. */
function headersFor(b: string | Buffer = body, t: number = ts, s: string = secret): Record<string, string> {
  const all = deliveryHeaders({ eventId: payload.event_id, timestamp: t, body: b, secret: s });
  return Object.fromEntries(Object.entries(all).filter(([k]) => !k.startsWith('webhook-')));
}

/** The Standard Webhooks headers alone (webhook-*), with one signature per secret. */
function standardHeaders(secrets: string[], t: number = ts): Record<string, string> {
  const [first, ...previous] = secrets;
  const all = deliveryHeaders({
    eventId: payload.event_id,
    timestamp: t,
    body,
    secret: first,
    previousSecrets: previous,
  });
  return Object.fromEntries(Object.entries(all).filter(([k]) => !k.startsWith('x-service-')));
}

function reason(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(WebhookVerificationError);
    return (err as WebhookVerificationError).reason;
  }
  throw new Error('expected a WebhookVerificationError');
}

describe('signature', () => {
  it('matches a hard-coded vector computed once with openssl', () => {
    // printf '%s' '1700000000.{"event_id":"3f1c2a9e-8b7d-4e6f-9a1b-2c3d4e5f6a7b","event_type":"job.completed"}' \
    //   | openssl dgst -sha256 -hmac 'whsec_test_secret'
    // SHA2-256(stdin)= 513f2c5f2c1b501308d9eb88f28cd70d77b75ad06fac3081c8dd0537a0684a6c
    const b = '{"event_id":"3f1c2a9e-8b7d-4e6f-9a1b-2c3d4e5f6a7b","event_type":"job.completed"}';
    expect(computeSignature('whsec_test_secret', 1700000000, b)).toBe(
      '513f2c5f2c1b501308d9eb88f28cd70d77b75ad06fac3081c8dd0537a0684a6c',
    );
  });

  it('matches openssl run now, for a full payload and for non-ASCII bytes', () => {
    expect(computeSignature(secret, ts, body)).toBe(opensslSignature(secret, ts, body));
    const unicode = JSON.stringify({ ...payload, job: { ...payload.job, status_detail: 'fertig ✓ — 完成' } });
    expect(computeSignature('s3cr3t', '1712345678', Buffer.from(unicode))).toBe(
      opensslSignature('s3cr3t', '1712345678', unicode),
    );
  });

  it('is lowercase hex HMAC-SHA256(secret, timestamp + "." + rawBody), sent only with a secret', () => {
    const h = headersFor();
    expect(h['x-service-signature']).toBe(createHmac('sha256', secret).update(`${ts}.${body}`).digest('hex'));
    expect(h['x-service-signature']).toMatch(/^[0-9a-f]{64}$/);
    expect(h).toMatchObject({
      'content-type': 'application/json',
      'user-agent': 'media-jobs-webhooks/1',
      'x-service-event-id': payload.event_id,
      'x-service-timestamp': String(ts),
    });
    const unsigned = deliveryHeaders({ eventId: payload.event_id, timestamp: ts, body, secret: null });
    expect(unsigned).not.toHaveProperty('x-service-signature');
  });
});

describe('verifyWebhook', () => {
  it('accepts a correct delivery and returns the parsed payload', () => {
    expect(verifyWebhook(body, headersFor(), secret, { now })).toEqual(payload);
    expect(verifyWebhook(Buffer.from(body), headersFor(), secret, { now: now.getTime() })).toEqual(payload);
  });

  it('accepts fetch Headers, header arrays and any letter case', () => {
    expect(verifyWebhook(body, new Headers(headersFor()), secret, { now })).toEqual(payload);
    const upper = Object.fromEntries(Object.entries(headersFor()).map(([k, v]) => [k.toUpperCase(), [v]]));
    expect(verifyWebhook(body, upper, secret, { now })).toEqual(payload);
  });

  it('accepts a timestamp just inside the tolerance either way', () => {
    expect(verifyWebhook(body, headersFor(body, ts - 300), secret, { now })).toEqual(payload);
    expect(verifyWebhook(body, headersFor(body, ts + 300), secret, { now })).toEqual(payload);
    expect(verifyWebhook(body, headersFor(body, ts - 3600), secret, { now, toleranceSeconds: 3600 })).toEqual(payload);
  });

  it('rejects a wrong signature or secret', () => {
    const h = headersFor();
    const sig = h['x-service-signature']!;
    const flipped = sig.slice(0, -1) + (sig.endsWith('0') ? '1' : '0');
    expect(reason(() => verifyWebhook(body, { ...h, 'x-service-signature': flipped }, secret, { now }))).toBe(
      'invalid_signature',
    );
    expect(reason(() => verifyWebhook(body, { ...h, 'x-service-signature': 'nothex' }, secret, { now }))).toBe(
      'invalid_signature',
    );
    expect(reason(() => verifyWebhook(body, { ...h, 'x-service-signature': sig.slice(0, 32) }, secret, { now }))).toBe(
      'invalid_signature',
    );
    expect(reason(() => verifyWebhook(body, h, 'another secret', { now }))).toBe('invalid_signature');
  });

  it('rejects a tampered body, including one re-serialised the same JSON', () => {
    const h = headersFor();
    const tampered = body.replace('"result_ready":true', '"result_ready":false');
    expect(reason(() => verifyWebhook(tampered, h, secret, { now }))).toBe('invalid_signature');
    expect(reason(() => verifyWebhook(JSON.stringify(payload, null, 2), h, secret, { now }))).toBe('invalid_signature');
  });

  it('rejects a timestamp changed after signing', () => {
    const h = { ...headersFor(), 'x-service-timestamp': String(ts + 1) };
    expect(reason(() => verifyWebhook(body, h, secret, { now }))).toBe('invalid_signature');
  });

  it('rejects a stale or future timestamp beyond the tolerance', () => {
    expect(reason(() => verifyWebhook(body, headersFor(body, ts - 301), secret, { now }))).toBe('timestamp_too_old');
    expect(reason(() => verifyWebhook(body, headersFor(body, ts + 301), secret, { now }))).toBe('timestamp_in_future');
    expect(reason(() => verifyWebhook(body, headersFor(body, ts - 61), secret, { now, toleranceSeconds: 60 }))).toBe(
      'timestamp_too_old',
    );
    // Without `now`, the system clock: a 2023 delivery is long stale.
    expect(reason(() => verifyWebhook(body, headersFor(), secret))).toBe('timestamp_too_old');
  });

  it('rejects missing or malformed headers', () => {
    for (const name of ['x-service-signature', 'x-service-timestamp', 'x-service-event-id']) {
      const h: Record<string, string> = headersFor();
      Reflect.deleteProperty(h, name);
      let err: unknown;
      try {
        verifyWebhook(body, h, secret, { now });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(WebhookVerificationError);
      expect((err as WebhookVerificationError).reason).toBe('missing_header');
      expect((err as Error).message).toBe(
        `missing ${name} or ${name.replace('x-service-', 'webhook-').replace('event-id', 'id')} header`,
      );
    }
    expect(reason(() => verifyWebhook(body, { ...headersFor(), 'x-service-timestamp': '17e8' }, secret, { now }))).toBe(
      'invalid_timestamp',
    );
    expect(reason(() => verifyWebhook(body, {}, secret, { now }))).toBe('missing_header');
  });

  it('rejects an event id header that does not match the signed body', () => {
    const h = { ...headersFor(), 'x-service-event-id': '00000000-0000-4000-8000-000000000000' };
    expect(reason(() => verifyWebhook(body, h, secret, { now }))).toBe('invalid_payload');
  });

  it('rejects a signed body that is not a JSON object', () => {
    const text = 'not json';
    expect(reason(() => verifyWebhook(text, headersFor(text), secret, { now }))).toBe('invalid_payload');
  });

  it('refuses to run without a secret or with a parsed body', () => {
    expect(() => verifyWebhook(body, headersFor(), '', { now })).toThrow(TypeError);
    expect(() => verifyWebhook(payload as unknown as string, headersFor(), secret, { now })).toThrow(TypeError);
  });
});

describe('Standard Webhooks signatures', () => {
  const other = 'whsec_' + Buffer.from('another key, 24 bytes ok').toString('base64');

  it('are verified by the standardwebhooks package, for whsec_ and for plain secrets', async () => {
    const { Webhook } = await import('standardwebhooks');
    const h = standardHeaders([other], Math.floor(Date.now() / 1000));
    expect(new Webhook(other).verify(body, h)).toEqual(payload);
    const plain = 'a plain secret';
    const hp = standardHeaders([plain], Math.floor(Date.now() / 1000));
    expect(new Webhook(Buffer.from(plain).toString('base64')).verify(body, hp)).toEqual(payload);
  });

  it('verifyWebhook accepts the Standard headers alone, with several signatures and several secrets', () => {
    const h = standardHeaders([other, secret]);
    expect(h['webhook-signature']!.split(' ')).toHaveLength(2);
    expect(verifyWebhook(body, h, other, { now })).toEqual(payload);
    expect(verifyWebhook(body, h, secret, { now })).toEqual(payload);
    expect(verifyWebhook(body, h, ['not it', secret], { now })).toEqual(payload);
    expect(reason(() => verifyWebhook(body, h, 'not it', { now }))).toBe('invalid_signature');
    expect(reason(() => verifyWebhook(body, { ...h, 'webhook-signature': 'v2,abc v1,AAAA' }, secret, { now }))).toBe(
      'invalid_signature',
    );
    // The signed id is the header's: another id does not verify.
    const wrongId = { ...h, 'webhook-id': '00000000-0000-4000-8000-000000000000' };
    expect(reason(() => verifyWebhook(body, wrongId, secret, { now }))).toBe('invalid_signature');
    expect(reason(() => verifyWebhook(body, standardHeaders([secret], ts - 301), secret, { now }))).toBe(
      'timestamp_too_old',
    );
  });

  it('signs the id, the timestamp and the raw body with the base64 key after whsec_', () => {
    const h = standardHeaders([other]);
    const key = Buffer.from(other.slice('whsec_'.length), 'base64');
    const expected = createHmac('sha256', key).update(`${payload.event_id}.${ts}.${body}`).digest('base64');
    expect(h['webhook-signature']).toBe(`v1,${expected}`);
    expect(h['webhook-id']).toBe(payload.event_id);
    expect(h['webhook-timestamp']).toBe(String(ts));
  });
});

describe("the sender's signing with keys made once (signedDeliveryHeaders)", () => {
  const secrets = [
    secret,
    'whsec_' + Buffer.from('another key, 24 bytes ok').toString('base64'),
    'a plain secret',
    'ü-secret ✓ 完成',
    // Longer than SHA-256's 64-byte block: HMAC hashes the key first.
    'x'.repeat(100),
    'whsec_' + Buffer.alloc(80, 7).toString('base64'),
    'y'.repeat(256),
  ];
  const bodies = [
    body,
    '',
    JSON.stringify({ ...payload, job: { ...payload.job, status_detail: 'fertig ✓ — 完成' } }),
    // Larger than the buffer the messages start in.
    JSON.stringify({ ...payload, pad: 'z'.repeat(10_000) }),
    body,
  ];

  /** The headers built with createHmac, one Hmac per signature (the recipe in docs/webhooks.md). */
  function referenceHeaders(t: number, b: string, s: string | null, previous: string[] = []) {
    const stamp = String(t);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': WEBHOOK_USER_AGENT,
      [EVENT_ID_HEADER]: payload.event_id,
      [TIMESTAMP_HEADER]: stamp,
    };
    if (!s) return headers;
    headers[SIGNATURE_HEADER] = computeSignature(s, stamp, b);
    headers[STANDARD_ID_HEADER] = payload.event_id;
    headers[STANDARD_TIMESTAMP_HEADER] = stamp;
    headers[STANDARD_SIGNATURE_HEADER] = [s, ...previous]
      .map((k) => `v1,${computeStandardSignature(k, payload.event_id, stamp, b)}`)
      .join(' ');
    return headers;
  }

  it('gives exactly the headers createHmac gives, for any secret, body and rotation', () => {
    for (const [i, s] of secrets.entries())
      for (const b of bodies) {
        const previous = secrets.slice(0, i % 3);
        const t = ts + i;
        const expected = referenceHeaders(t, b, s, previous);
        const keys = new SecretKeys(s);
        const got = signedDeliveryHeaders(
          payload.event_id,
          t,
          Buffer.from(b),
          keys,
          previous.map((p) => new SecretKeys(p)),
        );
        expect(got).toEqual(expected);
        expect(Object.keys(got)).toEqual(Object.keys(expected));
        // The same keys again (the sender reuses them): the same signature.
        expect(signedDeliveryHeaders(payload.event_id, t, Buffer.from(b), keys, [])['x-service-signature']).toBe(
          computeSignature(s, t, b),
        );
      }
  });

  it('sends no signature headers without a secret', () => {
    const got = signedDeliveryHeaders(payload.event_id, ts, Buffer.from(body), undefined);
    expect(got).toEqual(referenceHeaders(ts, body, null));
    expect(Object.keys(got)).toEqual(['content-type', 'user-agent', 'x-service-event-id', 'x-service-timestamp']);
  });
});
