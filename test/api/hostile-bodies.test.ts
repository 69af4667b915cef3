import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakeLookup } from '../helpers/servers.js';
import { startService, type TestService } from '../helpers/service.js';

// Hostile raw bodies on POST /jobs/submit/{type} and /jobs/batch, with and without an
// Idempotency-Key: every answer is an envelope with a 4xx or a 200, never a 5xx, and a 400 names
// the field. Production address rule, DNS faked so nothing leaves the machine.
const lookup = fakeLookup({ 'media.example.com': ['93.184.216.34'], 'hooks.example.com': ['93.184.216.35'] });
const SUBMIT = '/api/v1/jobs/submit/image-transform';
const BATCH = '/api/v1/jobs/batch';

let svc: TestService;
beforeAll(async () => {
  svc = await startService(
    { MEDIA_ALLOW_PRIVATE_NETWORKS: 'false', WORKER_CONCURRENCY: '0', RATE_LIMIT_SUBMIT: '0' },
    { lookup },
  );
});
afterAll(() => svc?.stop());

interface Answer {
  status: number;
  body: { code?: unknown; message?: unknown; data?: unknown } | undefined;
  text: string;
}

/** Sends the bytes as they are (invalid UTF-8 included), as JSON. */
async function post(path: string, raw: string | Buffer, key?: string): Promise<Answer> {
  const headers: Record<string, string> = { authorization: `Bearer ${svc.key}`, 'content-type': 'application/json' };
  if (key !== undefined) headers['idempotency-key'] = key;
  const sent = typeof raw === 'string' ? raw : new Uint8Array(raw);
  const res = await fetch(`${svc.base}${path}`, { method: 'POST', headers, body: sent });
  const text = await res.text();
  let body: Answer['body'];
  try {
    body = JSON.parse(text) as Answer['body'];
  } catch {
    body = undefined;
  }
  return { status: res.status, body, text };
}

/** A valid image-transform body as raw JSON text, with one field's raw value replaced. */
function bodyWith(field: string, raw: string): string {
  const fields: Record<string, string> = {
    job_type: '"image-transform"',
    model: '"lanczos3"',
    'input.source': '"https://media.example.com/a.jpg"',
    'input.width': '64',
  };
  const extra = field in fields ? '' : `,${JSON.stringify(field.replace(/^input\./, ''))}:${raw}`;
  const v = (f: string) => (f === field ? raw : fields[f]!);
  const input = `{"source":${v('input.source')},"width":${v('input.width')}${field.startsWith('input.') ? extra : ''}}`;
  return `{"job_type":${v('job_type')},"model":${v('model')},"input":${input}${field.startsWith('input.') ? '' : extra}}`;
}

const asBatch = (item: string) => `{"jobs":[${item}]}`;

function expectNamed(a: Answer, field: string): void {
  expect(a.status, a.text).toBe(400);
  expect(a.body).toEqual({ code: -1, message: expect.any(String), data: {} });
  expect(String(a.body!.message), a.text).toContain(field);
  expect(a.text.length).toBeLessThan(2_000);
}

/** The batch's answer for its one item: the item's status and message. */
function item(a: Answer): Answer {
  expect(a.status, a.text).toBe(200);
  const it = (a.body!.data as { items: Array<{ status: number; code: number; message: string }> }).items[0]!;
  return { status: it.status, body: { code: it.code, message: it.message, data: {} }, text: JSON.stringify(it) };
}

describe('numbers a double cannot hold', () => {
  const cases: Array<[string, string, string]> = [
    ['input.width', '1e400', 'input.width'],
    ['input.width', '-1e400', 'input.width'],
    ['priority', '1e400', 'priority'],
    ['cancel_after', '1e400', 'cancel_after'],
    ['retention', '-1e999', 'retention'],
    ['surprise', '1e400', 'surprise'],
    ['input.surprise', '[1, {"deeper": 1e400}]', 'input.surprise[1].deeper'],
  ];
  for (const key of [undefined, 'hostile-numbers']) {
    it.each(cases)(`%s = %s: 400 naming the field (Idempotency-Key: ${String(key)})`, async (field, raw, named) => {
      expectNamed(await post(SUBMIT, bodyWith(field, raw), key && `${key}:${field}`), named);
      // In a batch the whole body is refused at parse time, naming the item's path.
      expectNamed(await post(BATCH, asBatch(bodyWith(field, raw)), key && `${key}:b:${field}`), `jobs[0].${named}`);
    });
  }

  it('takes a tiny number as the zero it is, and -0 as 0', async () => {
    expectNamed(await post(SUBMIT, bodyWith('input.width', '1e-400')), 'input.width: must be at least 1');
    const r = await post(SUBMIT, bodyWith('priority', '-0'), 'minus-zero');
    expect(r.status, r.text).toBe(200);
    expect((r.body!.data as { priority: number }).priority).toBe(0);
    const again = await post(SUBMIT, bodyWith('priority', '0'), 'minus-zero');
    expect(again.status, again.text).toBe(200); // the same request in canonical JSON: a replay
  });
});

describe('other hostile bodies', () => {
  const deep = `${'['.repeat(100)}1${']'.repeat(100)}`;
  const long = `"${'x'.repeat(300_000)}"`;
  const cases: Array<[string, string, string]> = [
    ['input.width', deep, 'nested more than 64'],
    ['model', long, 'model'],
    ['job_type', long, 'job_type'],
    ['model', '"\\ud800"', 'model'],
    ['model', '"a\\udc00b"', 'model'],
    ['\\ud800', '1', 'unknown field'],
    ['model', '5', 'model: must be one of'],
    ['input.width', '"64"', 'input.width'],
    ['input.width', '64.5', 'input.width'],
    ['input.source', '{}', 'input.source'],
    ['webhook', '[]', 'webhook'],
    ['priority', '"high"', 'priority'],
    ['priority', '1e20', 'priority: must be at most 600'],
  ];
  it.each(
    cases.map(([f, raw, named]) => [f, raw.length > 40 ? `${raw.slice(0, 20)}…(${raw.length})` : raw, raw, named]),
  )('%s = %s: 400 naming it, on submit and in a batch', async (field, _label, raw, named) => {
    expectNamed(await post(SUBMIT, bodyWith(field, raw)), named);
    const batched = await post(BATCH, asBatch(bodyWith(field, raw)));
    if (batched.status === 400) expectNamed(batched, named);
    else if (field === 'job_type')
      expectNamed({ ...item(batched), status: 400 }, 'unknown job type'); // a 404 item
    else expectNamed(item(batched), named);
  });

  it('answers 400 for a body that is not an object, or not JSON', async () => {
    for (const raw of ['[]', '5', '"x"', 'null', '{"job_type":', '{"a":1}x', '\u00ff']) {
      expect((await post(SUBMIT, raw)).status).toBe(400);
      expect((await post(BATCH, raw)).status).toBe(400);
    }
  });

  it('reads invalid UTF-8 as replacement characters: a 400 naming the field', async () => {
    const text = bodyWith('model', '"lanczos3XX"');
    const bytes = Buffer.from(text);
    const at = bytes.indexOf('XX');
    bytes[at] = 0xff;
    bytes[at + 1] = 0xc3;
    expectNamed(await post(SUBMIT, bytes), 'model');
    expectNamed(item(await post(BATCH, Buffer.concat([Buffer.from('{"jobs":['), bytes, Buffer.from(']}')]))), 'model');
  });

  it('reports one message per rule (an integer past its safe range and the field maximum)', async () => {
    const a = await post(SUBMIT, bodyWith('input.width', '9007199254740993'));
    expect(a.body!.message).toBe('input.width: must be at most 16384');
  });
});

// --- fuzz ----------------------------------------------------------------------------------------

const HOSTILE = [
  '1e400',
  '-1e400',
  '1e-400',
  '-0',
  '-0.0',
  '9007199254740993',
  '123456789012345678901234567890',
  '1.7976931348623157e308',
  '5e-324',
  '"\\ud800"',
  '"\\udfff\\ud800"',
  '"\\u0000"',
  '"\u2028"',
  'null',
  'true',
  '[]',
  '{}',
  '""',
  '"image-transform"',
  '"lanczos3"',
  '"https://media.example.com/a.jpg"',
  '"http://127.0.0.1/x"',
  '["https://media.example.com/a.jpg"]',
  '{"url":"https://hooks.example.com/x"}',
  '{"__proto__":{"x":1}}',
  '"5m"',
  '"0s"',
  `"${'y'.repeat(5000)}"`,
  `${'['.repeat(70)}${']'.repeat(70)}`,
  `${'{"a":'.repeat(70)}1${'}'.repeat(70)}`,
];
const FIELDS = [
  'job_type',
  'model',
  'input',
  'input.source',
  'input.width',
  'input.quality',
  'input.format',
  'webhook',
  'priority',
  'cancel_after',
  'retention',
  'idempotency_key',
  'extra',
];

const rawValue = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...HOSTILE) },
  { weight: 1, arbitrary: fc.json({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }).map((s) => JSON.stringify(s)) },
);

/** A submit body: valid fields with some replaced, some doubled (duplicate keys), some dropped. */
const rawBody = fc
  .record({
    picks: fc.array(fc.tuple(fc.constantFrom(...FIELDS), rawValue), { maxLength: 4 }),
    duplicate: fc.option(fc.tuple(fc.constantFrom('job_type', 'model', 'input'), rawValue), { nil: undefined }),
    drop: fc.option(fc.constantFrom('job_type', 'model', 'input'), { nil: undefined }),
  })
  .map(({ picks, duplicate, drop }) => {
    const top = new Map<string, string>([
      ['job_type', '"image-transform"'],
      ['model', '"lanczos3"'],
    ]);
    const input = new Map<string, string>([
      ['source', '"https://media.example.com/a.jpg"'],
      ['width', '64'],
    ]);
    let wholeInput: string | undefined;
    for (const [field, raw] of picks) {
      if (field === 'input') wholeInput = raw;
      else if (field.startsWith('input.')) input.set(field.slice(6), raw);
      else top.set(field, raw);
    }
    if (drop) top.delete(drop);
    const parts = [...top].map(([k, v]) => `"${k}":${v}`);
    if (drop !== 'input')
      parts.push(`"input":${wholeInput ?? `{${[...input].map(([k, v]) => `"${k}":${v}`).join(',')}}`}`);
    if (duplicate) parts.push(`"${duplicate[0]}":${duplicate[1]}`);
    return `{${parts.join(',')}}`;
  });

/** Sometimes the bytes themselves are broken: a stray invalid UTF-8 byte, or text cut short. */
const rawBytes = (text: fc.Arbitrary<string>) =>
  fc.tuple(text, fc.nat(), fc.constantFrom('keep', 'keep', 'keep', 'byte', 'cut')).map(([t, n, how]) => {
    const b = Buffer.from(t);
    if (how === 'keep' || b.length === 0) return b;
    const at = n % b.length;
    return how === 'cut' ? b.subarray(0, at) : Buffer.concat([b.subarray(0, at), Buffer.from([0xff]), b.subarray(at)]);
  });

const idempotencyKey = fc.option(fc.constantFrom('fuzz-a', 'fuzz-b', 'fuzz-c'), { nil: undefined });

function checkAnswer(a: Answer, what: string): void {
  expect(a.status, `${what} -> ${a.text.slice(0, 300)}`).toBeLessThan(500);
  expect(a.body, a.text.slice(0, 300)).toEqual({
    code: a.status === 200 ? 0 : -1,
    message: expect.any(String),
    data: expect.any(Object),
  });
  if (a.status === 400) expect(String(a.body!.message).length).toBeGreaterThan(0);
}

describe('fuzz (fast-check, fixed seed): raw bodies never get a 5xx', () => {
  it('POST /jobs/submit/{type}', async () => {
    await fc.assert(
      fc.asyncProperty(rawBytes(rawBody), idempotencyKey, async (bytes, key) => {
        checkAnswer(await post(SUBMIT, bytes, key), bytes.toString());
      }),
      { numRuns: 400, seed: 31 },
    );
  });

  it('POST /jobs/batch', async () => {
    const batch = fc
      .array(fc.oneof({ weight: 4, arbitrary: rawBody }, { weight: 1, arbitrary: rawValue }), {
        minLength: 0,
        maxLength: 4,
      })
      .map((items) => `{"jobs":[${items.join(',')}]}`);
    await fc.assert(
      fc.asyncProperty(rawBytes(batch), idempotencyKey, async (bytes, key) => {
        checkAnswer(await post(BATCH, bytes, key && `${key}-batch`), bytes.toString());
      }),
      { numRuns: 250, seed: 31 },
    );
  });

  it('leaves the service healthy', async () => {
    expect((await fetch(`${svc.base}/healthz`)).status).toBe(200);
    const r = await post(SUBMIT, bodyWith('input.width', '32'));
    expect(r.status, r.text).toBe(200);
  });
});

describe('cancel takes no body', () => {
  it('accepts none or {}, and answers 400 naming any field', async () => {
    const submitOne = async () => (await post(SUBMIT, bodyWith('input.width', '32'))).body!.data as { uuid: string };
    const cancel = (uuid: string, raw?: string) =>
      fetch(`${svc.base}/api/v1/jobs/${uuid}/cancel`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${svc.key}`,
          ...(raw === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: raw,
      });
    const a = await submitOne();
    expect((await cancel(a.uuid)).status).toBe(200);
    const b = await submitOne();
    expect((await cancel(b.uuid, '{}')).status).toBe(200);
    const c = await submitOne();
    const bad = await cancel(c.uuid, '{"reason":"too slow"}');
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ code: -1, message: 'reason: unknown field', data: {} });
    expect((await cancel(c.uuid, '[]')).status).toBe(400);
    expect((await cancel(c.uuid, '')).status).toBe(200);
  });
});
