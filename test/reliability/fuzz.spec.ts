/**
 * Fuzzing the public API with fast-check (fixed seed, reproducible): random and malformed submit
 * bodies, headers, paths, methods and query strings. Each property checks every response against
 * an independent model of the contract (docs/api.md):
 *
 *  - every response under /api/v1 is the envelope, 2xx or 4xx, never 5xx, with an X-Request-Id;
 *  - a 2xx only when the request was actually valid (and, for the request kinds the model fully
 *    decides, exactly the status the model predicts);
 *  - afterwards the service is healthy: GET /healthz 200, a valid submit works, nothing polluted.
 *
 * Violations are collected per class (with the smallest example) instead of stopping at the
 * first, so one run reports every kind of problem; each class found so far also has a focused
 * regression test at the bottom of this file.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, revokeKey } from '../../src/store/keys.js';
import { startService, type TestService } from '../helpers/service.js';
import {
  caseCounts,
  DNS,
  EVENTS,
  has,
  isObj,
  type Obj,
  validEvents,
  describeRequest,
  envelopeProblem,
  isUuid,
  normalise,
  rawRequest,
  recordFigures,
  SEED,
  fcParams,
  totalCases,
  Violations,
  type RawRequestSpec,
  validUrl,
  VALID_URLS,
  INVALID_URLS,
} from './support.js';

const RUNS = caseCounts({ bodies: 3000, headers: 1500, paths: 3000, queries: 1000 });
const MAX_BODY_BYTES = 1024 * 1024;
const SUBMIT = '/api/v1/jobs/submit/image-transform';

let svc: TestService;
let port: number;
let key: string;
let otherKey: string;
let revoked: string;
/** A queued job of the caller, a cancelled one, and a job of another owner. */
let ownQueued: string;
let ownCancelled: string;
let othersJob: string;
let validCursor: string;
const figures: Record<string, unknown> = {};

// --- The model of a valid image-transform submit --------------------------------------------

const MODELS = ['lanczos3', 'mitchell', 'nearest'];
const FITS = ['cover', 'contain', 'fill', 'inside', 'outside'];
const FORMATS = ['jpeg', 'png', 'webp', 'avif'];

const onlyKeys = (o: Obj, allowed: string[]) => Object.keys(o).every((k) => allowed.includes(k));
const intIn = (v: unknown, lo: number, hi: number) =>
  typeof v === 'number' && Number.isInteger(v) && v >= lo && v <= hi;
const oneOf = (v: unknown, values: string[]) => typeof v === 'string' && values.includes(v);

/** The contract of POST /jobs/submit/image-transform, written from the README, not from the code. */
function validSubmit(b: unknown): boolean {
  if (!isObj(b) || !onlyKeys(b, ['job_type', 'model', 'input', 'webhook'])) return false;
  if (b.job_type !== 'image-transform' || !oneOf(b.model, MODELS)) return false;
  const i = b.input;
  if (!isObj(i) || !onlyKeys(i, ['source', 'width', 'height', 'fit', 'format', 'quality']) || !has(i, 'source'))
    return false;
  const s = i.source;
  if (!(typeof s === 'string' ? validUrl(s) : Array.isArray(s) && s.length === 1 && validUrl(s[0]))) return false;
  if (has(i, 'width') && !intIn(i.width, 1, 16384)) return false;
  if (has(i, 'height') && !intIn(i.height, 1, 16384)) return false;
  if (has(i, 'quality') && !intIn(i.quality, 1, 100)) return false;
  if (has(i, 'fit') && !oneOf(i.fit, FITS)) return false;
  if (has(i, 'format') && !oneOf(i.format, FORMATS)) return false;
  if (has(b, 'webhook')) {
    const w = b.webhook;
    if (!isObj(w) || !onlyKeys(w, ['url', 'secret', 'events']) || !validUrl(w.url)) return false;
    if (has(w, 'secret') && !(typeof w.secret === 'string' && w.secret.length >= 1 && w.secret.length <= 256))
      return false;
    if (has(w, 'events') && !validEvents(w.events)) return false;
  }
  return true;
}

/** What the server will see: the text decoded as UTF-8, parsed like JSON.parse. */
function expectedSubmitStatus(text: string): number {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length > MAX_BODY_BYTES) return 413;
  const seen = bytes.toString('utf8');
  if (seen.trim() === '') return 400;
  let value: unknown;
  try {
    value = JSON.parse(seen);
  } catch {
    return 400;
  }
  return validSubmit(value) ? 200 : 400;
}

// --- Arbitraries -------------------------------------------------------------------------------

const anyString = fc.oneof(
  fc.string({ maxLength: 20 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    '\u202e',
    'null',
    'true',
    '0',
    '-1',
    'ｉmage-transform',
    'image\u2011transform',
    'Lanczos3',
    'lanczos3 ',
    '😀',
    '\ud800',
  ),
);
const boundaryNumber = fc.constantFrom(
  0,
  1,
  -1,
  16384,
  16385,
  100,
  101,
  1.5,
  -0,
  1e3,
  2 ** 53,
  2 ** 53 + 2,
  1e308,
  -1e-9,
  0.1,
);
const smallJson = fc.jsonValue({ maxDepth: 3 });
const anyValue = fc.oneof(
  { weight: 3, arbitrary: smallJson },
  { weight: 2, arbitrary: anyString },
  { weight: 2, arbitrary: boundaryNumber },
  { weight: 3, arbitrary: fc.constantFrom(...VALID_URLS, ...INVALID_URLS) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      null,
      true,
      false,
      [],
      {},
      [null],
      ['http://media.example.com/photo.jpg', 'http://media.example.com/photo.jpg'],
    ),
  },
);

/** Valid bodies, varied: every optional part present or not, every allowed value. */
const validBody = fc
  .record(
    {
      model: fc.constantFrom(...MODELS),
      source: fc.oneof(
        fc.constantFrom(...VALID_URLS),
        fc.constantFrom(...VALID_URLS).map((u) => [u]),
      ),
      width: fc.integer({ min: 1, max: 16384 }),
      height: fc.integer({ min: 1, max: 16384 }),
      fit: fc.constantFrom(...FITS),
      format: fc.constantFrom(...FORMATS),
      quality: fc.integer({ min: 1, max: 100 }),
      webhook: fc.record(
        {
          url: fc.constantFrom(...VALID_URLS),
          secret: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }),
          events: fc.subarray([...EVENTS], { minLength: 1 }),
        },
        { requiredKeys: ['url'] },
      ),
    },
    { requiredKeys: ['model', 'source'] },
  )
  .map(({ model, source, webhook, ...options }) => {
    const body: Obj = { job_type: 'image-transform', model, input: { source, ...options } };
    if (webhook) body.webhook = webhook;
    return body;
  });

/** All [path] locations in a JSON value, objects and arrays included. */
function paths(v: unknown, prefix: Array<string | number> = []): Array<Array<string | number>> {
  const out: Array<Array<string | number>> = [prefix];
  if (Array.isArray(v)) v.forEach((x, i) => out.push(...paths(x, [...prefix, i])));
  else if (isObj(v)) for (const k of Object.keys(v)) out.push(...paths(v[k], [...prefix, k]));
  return out;
}

type Mutation =
  | { op: 'delete' }
  | { op: 'replace'; value: unknown }
  | { op: 'rename'; name: string }
  | { op: 'add'; name: string; value: unknown }
  | { op: 'wrap' }
  | { op: 'duplicateKey'; value: unknown };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.constant<Mutation>({ op: 'delete' }),
  anyValue.map((value): Mutation => ({ op: 'replace', value })),
  fc
    .oneof(
      anyString,
      fc.constantFrom(
        'Model',
        'job-type',
        'jobType',
        'inputs',
        'webhooks',
        'url ',
        'source\u0000',
        'sourcé',
        'width',
        'secret',
        'events',
      ),
    )
    .map((name): Mutation => ({ op: 'rename', name })),
  fc
    .tuple(
      fc.oneof(anyString, fc.constantFrom('extra', 'priority', 'options', 'target', 'reference', 'audio', 'metadata')),
      anyValue,
    )
    .map(([name, value]): Mutation => ({ op: 'add', name, value })),
  fc.constant<Mutation>({ op: 'wrap' }),
  anyValue.map((value): Mutation => ({ op: 'duplicateKey', value })),
);

/** Applies one mutation at one location; returns the JSON text (duplicate keys need text). */
function mutate(body: Obj, where: number, m: Mutation): string {
  const all = paths(body).filter((p) => p.length > 0);
  const p = all[where % all.length]!;
  const clone = JSON.parse(JSON.stringify(body)) as Obj;
  let parent: any = clone;
  for (const k of p.slice(0, -1)) parent = parent[k];
  const last = p[p.length - 1]!;
  switch (m.op) {
    case 'delete':
      if (Array.isArray(parent)) parent.splice(last as number, 1);
      else Reflect.deleteProperty(parent, last);
      return JSON.stringify(clone);
    case 'replace':
      parent[last] = m.value;
      return JSON.stringify(clone);
    case 'wrap':
      parent[last] = [parent[last]];
      return JSON.stringify(clone);
    case 'rename':
    case 'add': {
      const target = isObj(parent) ? parent : clone;
      if (m.op === 'rename' && isObj(parent)) {
        const v = parent[last as string];
        Reflect.deleteProperty(parent, last);
        Object.defineProperty(target, m.name, { value: v, enumerable: true, writable: true, configurable: true });
      } else {
        const value = m.op === 'add' ? m.value : parent[last];
        Object.defineProperty(target, m.op === 'add' ? m.name : String(last), {
          value,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      return JSON.stringify(clone);
    }
    case 'duplicateKey': {
      // {"k": <other>, ..., "k": <original>} or the reverse: JSON.parse keeps the last one.
      const text = JSON.stringify(clone);
      if (typeof last !== 'string' || !isObj(parent)) return text;
      const needle = `${JSON.stringify(last)}:`;
      const at = text.indexOf(needle);
      if (at < 0) return text;
      return `${text.slice(0, at)}${needle}${JSON.stringify(m.value)},${text.slice(at)}`;
    }
  }
}

/** Prototype-pollution attempts spliced into a valid body's JSON text at some object level. */
const pollution = fc
  .tuple(
    validBody,
    fc.constantFrom('top', 'input', 'webhook'),
    fc.constantFrom(
      '"__proto__":{"polluted":"yes","width":5}',
      '"constructor":{"prototype":{"polluted":"yes"}}',
      '"__proto__":null',
      '"prototype":{"polluted":"yes"}',
      '"__defineGetter__":"x"',
      '"hasOwnProperty":1',
      '"toString":"x"',
      '"valueOf":{}',
      '"__proto__":{"__proto__":{"polluted":"yes"}}',
    ),
  )
  .map(([body, level, fragment]) => {
    if (level === 'webhook' && !body.webhook) body.webhook = { url: VALID_URLS[0] };
    const text = JSON.stringify(body);
    const anchor = level === 'top' ? 0 : text.indexOf(`"${level}":{`) + level.length + 3;
    const at = level === 'top' ? 1 : anchor + 1;
    return `${text.slice(0, at)}${fragment},${text.slice(at)}`;
  });

const deepNesting = fc
  .tuple(
    fc.oneof(
      fc.integer({ min: 1, max: 100 }),
      fc.integer({ min: 100, max: 5000 }),
      fc.integer({ min: 5000, max: 400_000 }),
    ),
    fc.constantFrom('array', 'object'),
    fc.constantFrom('top', 'input.extra', 'model', 'webhook.events'),
  )
  .map(([depth, kind, where]) => {
    const nested =
      kind === 'array' ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    if (where === 'top') return nested;
    const base = {
      job_type: 'image-transform',
      model: 'lanczos3',
      input: { source: VALID_URLS[0] },
      webhook: { url: VALID_URLS[0] },
    };
    const marker = '"__NESTED__"';
    if (where === 'model') return JSON.stringify({ ...base, model: '__NESTED__' }).replace(marker, nested);
    if (where === 'input.extra')
      return JSON.stringify({ ...base, input: { ...base.input, extra: '__NESTED__' } }).replace(marker, nested);
    return JSON.stringify({ ...base, webhook: { url: VALID_URLS[0], events: '__NESTED__' } }).replace(marker, nested);
  });

const hugeString = fc
  .tuple(
    fc.integer({ min: 10_000, max: 1_200_000 }),
    fc.constantFrom('a', 'é', '😀', '\\u0000', '"'),
    fc.constantFrom('model', 'secret', 'source', 'key', 'text'),
  )
  .map(([n, ch, where]) => {
    const unit = ch === '"' ? '\\"' : ch;
    const s = unit.repeat(Math.max(1, Math.floor(n / Buffer.byteLength(unit))));
    const base = { job_type: 'image-transform', model: 'lanczos3', input: { source: VALID_URLS[0] } } as Obj;
    if (where === 'text') return s;
    if (where === 'key')
      return `{"${s}":1,"job_type":"image-transform","model":"lanczos3","input":{"source":"${VALID_URLS[0]}"}}`;
    const text =
      where === 'model'
        ? JSON.stringify({ ...base, model: '__S__' })
        : where === 'secret'
          ? JSON.stringify({ ...base, webhook: { url: VALID_URLS[0], secret: '__S__' } })
          : JSON.stringify({ ...base, input: { source: '__S__' } });
    return text.replace('__S__', s);
  });

/** Broken JSON text: truncations, trailing garbage, comments, single quotes, NaN, BOM… */
const malformedText = fc
  .tuple(
    validBody,
    fc.nat(),
    fc.constantFrom('truncate', 'trailing', 'comment', 'quotes', 'nan', 'bom', 'comma', 'raw'),
  )
  .map(([b, n, how]) => {
    const t = JSON.stringify(b);
    switch (how) {
      case 'truncate':
        return t.slice(0, n % t.length);
      case 'trailing':
        return `${t} x`;
      case 'comment':
        return `/* c */${t}`;
      case 'quotes':
        return t.replace(/"/g, "'");
      case 'nan':
        return t.replace(/"lanczos3"|"mitchell"|"nearest"/, 'NaN');
      case 'bom':
        return `\ufeff${t}`;
      case 'comma':
        return t.replace(/}$/, ',}');
      default:
        return String.fromCharCode(...Array.from({ length: 1 + (n % 40) }, (_, i) => (n * (i + 7)) % 256));
    }
  });

const submitText: fc.Arbitrary<{ kind: string; text: string }> = fc.oneof(
  { weight: 4, arbitrary: validBody.map((b) => ({ kind: 'valid', text: JSON.stringify(b) })) },
  {
    weight: 8,
    arbitrary: fc
      .tuple(validBody, fc.nat(), mutation)
      .map(([b, w, m]) => ({ kind: `mutated:${m.op}`, text: mutate(b, w, m) })),
  },
  {
    weight: 2,
    arbitrary: fc.tuple(validBody, fc.nat(), mutation, fc.nat(), mutation).map(([b, w1, m1, w2, m2]) => ({
      kind: 'mutated:twice',
      text: mutate(JSON.parse(mutate(b, w1, m1)) as Obj, w2, m2),
    })),
  },
  {
    weight: 3,
    arbitrary: fc.jsonValue({ maxDepth: 5 }).map((v) => ({ kind: 'random-json', text: JSON.stringify(v) ?? 'null' })),
  },
  {
    weight: 2,
    arbitrary: fc
      .jsonValue({ maxDepth: 4, stringUnit: 'grapheme' })
      .map((v) => ({ kind: 'random-json-unicode', text: JSON.stringify(v) ?? 'null' })),
  },
  { weight: 2, arbitrary: pollution.map((text) => ({ kind: 'prototype-pollution', text })) },
  { weight: 1, arbitrary: deepNesting.map((text) => ({ kind: 'deep-nesting', text })) },
  { weight: 1, arbitrary: hugeString.map((text) => ({ kind: 'huge-string', text })) },
  { weight: 2, arbitrary: malformedText.map((text) => ({ kind: 'malformed-json', text })) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 60 }).map((text) => ({ kind: 'random-text', text })) },
);

// --- Setup ---------------------------------------------------------------------------------------

beforeAll(async () => {
  svc = await startService(
    {
      // No workers: submitted jobs stay queued, nothing is fetched, nothing leaves the machine.
      WORKER_CONCURRENCY: '0',
      // The production address rule, with a fake DNS (test/helpers/servers.ts fakeLookup).
      MEDIA_ALLOW_PRIVATE_NETWORKS: 'false',
      RATE_LIMIT_SUBMIT: '0',
      RATE_LIMIT_READ: '0',
      MAX_BODY_BYTES: String(MAX_BODY_BYTES),
    },
    { lookup: DNS },
  );
  port = Number(new URL(svc.base).port);
  key = svc.key;
  otherKey = await svc.newKey('mallory');
  const r = await createKey(svc.app.store.db, 'revoked-owner', Date.now());
  await revokeKey(svc.app.store.db, r.id, Date.now());
  revoked = r.key;
  const body = { job_type: 'image-transform', model: 'lanczos3', input: { source: VALID_URLS[0] } };
  ownQueued = (await svc.call('POST', SUBMIT, { body })).body.data.uuid;
  ownCancelled = (await svc.call('POST', SUBMIT, { body })).body.data.uuid;
  expect((await svc.call('POST', `/api/v1/jobs/${ownCancelled}/cancel`)).status).toBe(200);
  othersJob = (await svc.call('POST', SUBMIT, { body, key: otherKey })).body.data.uuid;
  validCursor = (await svc.call('GET', '/api/v1/jobs?limit=1')).body.data.next_cursor;
  expect(isUuid(ownQueued) && isUuid(ownCancelled) && isUuid(othersJob) && typeof validCursor === 'string').toBe(true);
});

afterAll(async () => {
  recordFigures('fuzzing', figures);
  await svc?.stop();
});

const statusCounts = () => new Map<number, number>();
const bump = (m: Map<number, number>, s: number) => m.set(s, (m.get(s) ?? 0) + 1);
const countsObj = (m: Map<number, number>) => Object.fromEntries([...m].sort((a, b) => a[0] - b[0]));

function report(
  name: string,
  runs: number,
  counts: Map<number, number>,
  v: Violations,
  extra: Record<string, unknown> = {},
) {
  figures[`${name}: cases`] = runs;
  figures[`${name}: statuses`] = countsObj(counts);
  // API keys masked: results.md is committed.
  const mask = (s: string) => [key, otherKey, revoked].reduce((t, k) => t.split(k).join('<API key>'), s);
  figures[`${name}: violations`] = v.size === 0 ? 0 : v.summary().map((s) => mask(s).slice(0, 300));
  Object.assign(figures, Object.fromEntries(Object.entries(extra).map(([k, x]) => [`${name}: ${k}`, x])));
}

// --- Properties ----------------------------------------------------------------------------------

describe('fuzzing the public API (fast-check, seed fixed)', () => {
  it(`submit bodies: random, near-valid, malformed, huge, deep, unicode, prototype keys (${RUNS.bodies} cases)`, async () => {
    const v = new Violations();
    const counts = statusCounts();
    const kinds = new Map<string, number>();
    let accepted = 0;
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(submitText, fc.boolean(), async ({ kind, text }, pretty) => {
        runs++;
        kinds.set(kind.split(':')[0]!, (kinds.get(kind.split(':')[0]!) ?? 0) + 1);
        // Whitespace and key order are not meaning: sometimes re-indent what parses.
        let sent = text;
        if (pretty && text.length < 100_000) {
          try {
            sent = JSON.stringify(JSON.parse(text), null, 2);
            if (JSON.stringify(JSON.parse(sent)) !== JSON.stringify(JSON.parse(text))) sent = text;
          } catch {
            sent = text;
          }
        }
        const expected = expectedSubmitStatus(sent);
        const res = await rawRequest(port, {
          method: 'POST',
          target: SUBMIT,
          headers: [
            ['Authorization', `Bearer ${key}`],
            ['Content-Type', 'application/json'],
          ],
          body: sent,
        });
        bump(counts, res.status);
        const ex = `${kind} body(${Buffer.byteLength(sent)} bytes)=${sent.length > 300 ? `${sent.slice(0, 200)}…` : sent} → ${res.status} ${res.text.slice(0, 200)}`;
        const problem = envelopeProblem(res);
        if (problem) v.add(`${normalise(problem)} [${kind.split(':')[0]}]`, ex);
        else if (res.status !== expected) v.add(`expected ${expected}, got ${res.status} [${kind.split(':')[0]}]`, ex);
        else if (res.status === 200) {
          accepted++;
          const d = JSON.parse(res.text).data;
          const parsed = JSON.parse(Buffer.from(sent, 'utf8').toString('utf8')) as Obj;
          if (
            !isUuid(d.uuid) ||
            d.status !== 'queued' ||
            d.job_type !== 'image-transform' ||
            d.model !== parsed.model ||
            d.result_ready !== false
          ) {
            v.add('accepted job object is wrong', ex);
          }
        }
        return true;
      }),
      fcParams(RUNS.bodies),
    );
    report('submit bodies', runs, counts, v, {
      'accepted (valid by the model)': accepted,
      'case kinds': Object.fromEntries(kinds),
    });
    expect(v.summary()).toEqual([]);
  });

  it(`headers: Authorization, Content-Type, Idempotency-Key (raw bytes), X-Request-Id (${RUNS.headers} cases)`, async () => {
    const v = new Violations();
    const counts = statusCounts();
    let runs = 0;
    let n = 0;
    let replays = 0;
    let conflicts = 0;
    /** Idempotency keys that created a job: their canonical body and the original request id. */
    const stored = new Map<string, { body: string; obj: object; requestId: string; uuid: string }>();
    const usedKeys: string[] = [];

    type AuthCase = { value: string | Buffer | null; ok: boolean };
    const auth = fc.oneof(
      { weight: 6, arbitrary: fc.constant<AuthCase>({ value: 'VALID', ok: true }) },
      {
        weight: 6,
        arbitrary: fc.constantFrom<AuthCase>(
          { value: 'bearer KEY', ok: true },
          { value: 'BEARER KEY', ok: true },
          { value: 'Bearer   KEY', ok: true },
          { value: '  Bearer KEY  ', ok: true },
          { value: null, ok: false },
          { value: '', ok: false },
          { value: 'Bearer', ok: false },
          { value: 'Bearer ', ok: false },
          { value: 'BearerKEY', ok: false },
          { value: 'Bearer\tKEY', ok: false },
          { value: 'Basic bWpfOng=', ok: false },
          { value: 'Token KEY', ok: false },
          { value: 'Bearer KEYx', ok: false },
          { value: 'Bearer SHORT', ok: false },
          { value: 'Bearer REVOKED', ok: false },
          { value: 'Bearer KEY, Bearer KEY', ok: false },
          { value: 'Bearer KEY KEY', ok: false },
          { value: 'Bearer "KEY"', ok: false },
          { value: 'Bearer mj_00000000000000000000000000000000', ok: false },
          { value: Buffer.concat([Buffer.from('Bearer KEY'), Buffer.from([0xe9])]), ok: false },
          { value: Buffer.concat([Buffer.from('Bearer '), Buffer.from('ключ', 'utf8')]), ok: false },
          { value: Buffer.from(`Bearer ${'x'.repeat(5000)}`), ok: false },
        ),
      },
      {
        weight: 1,
        arbitrary: fc
          .string({ unit: 'binary-ascii', maxLength: 60 })
          // eslint-disable-next-line no-control-regex -- control characters are exactly what this filter keeps out of a header
          .filter((s) => !/[\x00-\x08\x0a-\x1f\x7f]/.test(s))
          .map<AuthCase>((s) => ({ value: s, ok: false })),
      },
    );
    type CtCase = { value: string | null; ok: boolean | 'either' };
    const contentType = fc.oneof(
      { weight: 6, arbitrary: fc.constant<CtCase>({ value: 'application/json', ok: true }) },
      {
        weight: 6,
        arbitrary: fc.constantFrom<CtCase>(
          { value: 'application/json; charset=utf-8', ok: true },
          { value: 'application/json;charset=UTF-8', ok: true },
          { value: 'Application/JSON', ok: true },
          { value: 'application/vnd.api+json', ok: true },
          { value: 'application/problem+json; charset=utf-8', ok: true },
          { value: 'application/json;', ok: 'either' },
          { value: 'application/json, text/plain', ok: 'either' },
          { value: null, ok: false },
          { value: '', ok: false },
          { value: 'text/plain', ok: false },
          { value: 'text/json', ok: false },
          { value: 'application/jsonp', ok: false },
          { value: 'application/json5', ok: false },
          { value: 'application/x-www-form-urlencoded', ok: false },
          { value: 'multipart/form-data; boundary=x', ok: false },
          { value: 'application/octet-stream', ok: false },
          { value: 'json', ok: false },
          { value: '*/*', ok: false },
        ),
      },
    );
    type IdemCase =
      | { kind: 'none' }
      | { kind: 'fresh'; len?: number }
      | { kind: 'reuse'; sameBody: boolean }
      | { kind: 'bad'; value: string | Buffer };
    const idem = fc.oneof(
      { weight: 4, arbitrary: fc.constant<IdemCase>({ kind: 'none' }) },
      {
        weight: 4,
        arbitrary: fc.constantFrom<IdemCase>(
          { kind: 'fresh' },
          { kind: 'fresh', len: 1 },
          { kind: 'fresh', len: 255 },
          { kind: 'fresh', len: 40 },
        ),
      },
      { weight: 3, arbitrary: fc.boolean().map<IdemCase>((sameBody) => ({ kind: 'reuse', sameBody })) },
      {
        weight: 3,
        arbitrary: fc.constantFrom<IdemCase>(
          { kind: 'bad', value: '' },
          { kind: 'bad', value: '   ' },
          { kind: 'bad', value: 'k'.repeat(256) },
          { kind: 'bad', value: 'k'.repeat(4000) },
          { kind: 'bad', value: 'tab\tinside' },
          { kind: 'bad', value: Buffer.from('ключ-1', 'utf8') },
          { kind: 'bad', value: Buffer.from([0x6b, 0xe9, 0xff]) },
          { kind: 'bad', value: Buffer.from('😀', 'utf8') },
        ),
      },
    );
    const requestId = fc.oneof(
      fc.constant<string | Buffer | null>(null),
      fc.constantFrom<string | Buffer | null>(
        'req-1',
        'a'.repeat(128),
        'a'.repeat(129),
        'has space',
        'semi;colon',
        '',
        'ok._:@/+=-',
        Buffer.from('réq', 'utf8'),
      ),
      // eslint-disable-next-line no-control-regex -- control characters are exactly what this filter keeps out of a header
      fc.string({ unit: 'binary-ascii', maxLength: 40 }).filter((s) => !/[\x00-\x08\x0a-\x1f\x7f]/.test(s)),
    );
    const bodies = [
      { job_type: 'image-transform', model: 'lanczos3', input: { source: VALID_URLS[0], width: 64 } },
      {
        job_type: 'image-transform',
        model: 'nearest',
        input: { source: [VALID_URLS[4]] },
        webhook: { url: VALID_URLS[1], events: ['job.failed'] },
      },
      { job_type: 'image-transform', model: 'mitchell', input: { source: VALID_URLS[6], format: 'webp', quality: 50 } },
    ];
    const sortDeep = (x: unknown): unknown =>
      Array.isArray(x)
        ? x.map(sortDeep)
        : isObj(x)
          ? Object.fromEntries(
              Object.keys(x)
                .sort()
                .map((k) => [k, sortDeep(x[k])]),
            )
          : x;
    const canonical = (b: unknown) => JSON.stringify(sortDeep(b));
    const REQUEST_ID_OK = /^[A-Za-z0-9._:@/+=-]{1,128}$/;

    await fc.assert(
      fc.asyncProperty(
        auth,
        contentType,
        idem,
        requestId,
        fc.nat(bodies.length - 1),
        fc.nat(),
        async (a, ct, ik, rid, bi, pick) => {
          runs++;
          n++;
          const body = bodies[bi]!;
          const text = JSON.stringify(body);
          const headers: Array<[string, string | Buffer]> = [];
          const sub = (s: string) =>
            s
              .replace(/SHORT/, key.slice(0, -1))
              .replace(/REVOKED/, revoked)
              .replace(/KEY/g, key);
          if (a.value !== null)
            headers.push([
              'Authorization',
              a.value === 'VALID'
                ? `Bearer ${key}`
                : typeof a.value === 'string'
                  ? sub(a.value)
                  : Buffer.from(sub(a.value.toString('latin1')), 'latin1'),
            ]);
          if (ct.value !== null) headers.push(['Content-Type', ct.value]);
          let idemKey: string | undefined;
          let idemValid = true;
          if (ik.kind === 'fresh') {
            const base = `fz-${SEED}-${n}-`;
            idemKey =
              ik.len === undefined
                ? `${base}${pick}`
                : ik.len === 1
                  ? String.fromCharCode(33 + (n % 94))
                  : (base + 'x'.repeat(300)).slice(0, ik.len);
            if (ik.len === 1 && usedKeys.includes(idemKey)) idemKey = `${base}1`;
            headers.push(['Idempotency-Key', idemKey]);
          } else if (ik.kind === 'reuse') {
            idemKey = usedKeys.length > 0 ? usedKeys[pick % usedKeys.length] : `fz-${SEED}-${n}-r`;
            headers.push(['Idempotency-Key', idemKey!]);
          } else if (ik.kind === 'bad') {
            idemValid = false;
            headers.push(['Idempotency-Key', ik.value]);
          }
          if (rid !== null) headers.push(['X-Request-Id', rid]);
          const reused = idemKey !== undefined ? stored.get(idemKey) : undefined;
          const sendBody =
            ik.kind === 'reuse' && reused
              ? ik.sameBody
                ? reused.obj
                : bodies[(bodies.findIndex((b) => canonical(b) === reused.body) + 1) % bodies.length]!
              : body;
          const sendText = sendBody === body ? text : JSON.stringify(sendBody);

          // The contract's order: authentication, then the media type, then the key's syntax, then idempotency.
          let expected: number[];
          if (!a.ok) expected = [401];
          else if (ct.ok === false) expected = [415];
          else if (!idemValid) expected = ct.ok === 'either' ? [400, 415] : [400];
          else if (reused) expected = canonical(sendBody) === reused.body ? [200] : [409];
          else expected = [200];
          if (ct.ok === 'either' && expected[0] === 200) expected = [200, 415];
          if (ct.ok === 'either' && expected[0] === 409) expected = [409, 415];

          const res = await rawRequest(port, { method: 'POST', target: SUBMIT, headers, body: sendText });
          bump(counts, res.status);
          const ex = describeRequest(
            'POST',
            SUBMIT,
            `headers=${JSON.stringify(headers.map(([k, x]) => [k, typeof x === 'string' ? x.slice(0, 80) : `<bytes ${x.subarray(0, 40).toString('hex')}>`]))} → ${res.status} ${res.text.slice(0, 160)}`,
          );
          const problem = envelopeProblem(res);
          if (problem) {
            v.add(normalise(problem), ex);
            return;
          }
          if (!expected.includes(res.status)) {
            v.add(
              `expected ${expected.join('|')}, got ${res.status} (auth ok=${a.ok}, content-type ok=${ct.ok}, key=${ik.kind})`,
              ex,
            );
            return;
          }
          // X-Request-Id: echoed when sane, else generated; a replay carries the original one.
          const gotId = res.headers['x-request-id']!;
          const sentId = rid === null ? undefined : typeof rid === 'string' ? rid.trim() : rid.toString('latin1');
          if (res.headers['idempotent-replayed'] === 'true') {
            replays++;
            if (gotId !== reused?.requestId) v.add('replay without the original X-Request-Id', ex);
            if (JSON.parse(res.text).data.uuid !== reused?.uuid) v.add('replay of a different job', ex);
          } else if (sentId !== undefined && REQUEST_ID_OK.test(sentId)) {
            if (gotId !== sentId) v.add('sane X-Request-Id not echoed', ex);
          } else if (!isUuid(gotId)) v.add('generated X-Request-Id is not a uuid', ex);
          if (res.status === 409) conflicts++;
          if (res.status === 200 && idemKey !== undefined && !reused) {
            stored.set(idemKey, {
              body: canonical(sendBody),
              obj: sendBody,
              requestId: gotId,
              uuid: JSON.parse(res.text).data.uuid,
            });
            usedKeys.push(idemKey);
          }
          if (res.status === 401 && !/^Bearer realm=/.test(res.headers['www-authenticate'] ?? ''))
            v.add('401 without WWW-Authenticate: Bearer', ex);
          return true;
        },
      ),
      fcParams(RUNS.headers),
    );
    report('headers', runs, counts, v, {
      'idempotent replays': replays,
      'idempotency conflicts (409)': conflicts,
      'idempotency keys stored': stored.size,
    });
    expect(v.summary()).toEqual([]);
  });

  it(`paths and methods: random segments, encodings, dot segments, long, unknown methods (${RUNS.paths} cases)`, async () => {
    const v = new Violations();
    const counts = statusCounts();
    let runs = 0;
    let ok2xx = 0;
    const own = () => [ownQueued, ownCancelled];

    const segment = fc.oneof(
      {
        weight: 6,
        arbitrary: fc.constantFrom(
          'jobs',
          'submit',
          'image-transform',
          'image-face-swap',
          'status',
          'cancel',
          'result',
          'webhook-deliveries',
          'redeliver',
          'job-types',
          'v1',
          'api',
        ),
      },
      { weight: 4, arbitrary: fc.constantFrom('OWN', 'OWN_UPPER', 'CANCELLED', 'OTHERS', 'RANDOM_UUID', 'NIL_UUID') },
      {
        weight: 2,
        arbitrary: fc.constantFrom(
          '..',
          '.',
          '%2e%2e',
          '%2E',
          '%2F',
          '%2f..%2f',
          '%00',
          '%20',
          '%',
          '%zz',
          '%E0%A4%A',
          '~',
          ';',
          ';x=1',
          '%3B',
          '%3F',
          '%23',
          '*',
          '\\',
          '%5C',
          'job%2Dtypes',
          '%6Aobs',
          '%C3%A9',
          '%F0%9F%98%80',
          '%FF',
          '',
        ),
      },
      { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 12 }).map((s) => encodeURIComponent(s)) },
      { weight: 1, arbitrary: fc.integer({ min: 90, max: 6000 }).map((n) => 'a'.repeat(n)) },
      { weight: 1, arbitrary: fc.integer({ min: 90, max: 3000 }).map((n) => '%41'.repeat(Math.floor(n / 3))) },
    );
    const method = fc.oneof(
      { weight: 8, arbitrary: fc.constantFrom('GET', 'POST') },
      { weight: 4, arbitrary: fc.constantFrom('PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD') },
      {
        weight: 2,
        arbitrary: fc.constantFrom(
          'PROPFIND',
          'SEARCH',
          'COPY',
          'MOVE',
          'LOCK',
          'UNLOCK',
          'REPORT',
          'MKCOL',
          'TRACE',
          'PURGE',
          'NOTIFY',
          'SUBSCRIBE',
          'LINK',
          'MKCALENDAR',
          'QUERY',
          'ACL',
          'BIND',
          'M-SEARCH',
        ),
      },
    );
    const query = fc.oneof(
      { weight: 4, arbitrary: fc.constant('') },
      {
        weight: 2,
        arbitrary: fc.constantFrom(
          '?',
          '?&&',
          '?=',
          '?a',
          '?wait=0',
          '?wait=abc',
          '?wait=61',
          '?limit=1',
          '?status=queued',
          '?__proto__=1',
          '?a=%zz',
          '?x=%',
          '#frag',
          '?a=1#b',
        ),
      },
      {
        weight: 1,
        arbitrary: fc
          .string({ unit: 'grapheme', maxLength: 30 })
          .map((s) => `?${encodeURIComponent(s)}=${encodeURIComponent(s)}`),
      },
    );
    const bodyKind = fc.constantFrom<'none' | 'empty-json' | 'valid-submit' | 'junk'>(
      'none',
      'none',
      'none',
      'empty-json',
      'valid-submit',
      'junk',
    );

    /**
     * Whether the model allows a 2xx for this request (an upper bound: when in doubt, allowed).
     * Only GETs of existing resources of the caller, and a cancel of the caller's job, may succeed.
     */
    function mayBe2xx(m: string, segs0: string[], q: string, bk: string): boolean {
      const segs = [...segs0];
      while (segs.length > 0 && segs[segs.length - 1] === '') segs.pop(); // trailing slashes
      if (segs.some((s) => s === '')) return false;
      let dec: string[];
      try {
        dec = segs.map((s) => decodeURIComponent(s));
      } catch {
        return false;
      }
      const get = m === 'GET' || m === 'HEAD';
      const mine = (u: string | undefined) => u !== undefined && own().includes(u.toLowerCase());
      // The query as the server splits it ('#' included: a fragment is not stripped from a request target).
      const names = q
        .replace(/^[?#]/, '')
        .split(/[&#?]/)
        .filter(Boolean)
        .map((p) => p.split('=')[0]!);
      const queryOnly = (allowed: string[]) =>
        names.every((n) => n === '' || allowed.includes(n)) && !/wait=(abc|61)/.test(q);
      if (dec.length === 1 && dec[0] === 'job-types') return get;
      if (dec.length === 1 && dec[0] === 'jobs') return get && queryOnly(['limit', 'status']);
      if (dec.length === 3 && dec[0] === 'jobs' && dec[1] === 'submit')
        return m === 'POST' && dec[2] === 'image-transform' && bk === 'valid-submit';
      // GET /jobs/{uuid}: the job with its input (the dashboard's job page).
      if (dec.length === 2 && dec[0] === 'jobs' && mine(dec[1])) return get;
      if (dec.length === 3 && dec[0] === 'jobs' && mine(dec[1])) {
        if (dec[2] === 'status') return get && queryOnly(['wait']);
        if (dec[2] === 'events') return get;
        if (dec[2] === 'result' || dec[2] === 'webhook-deliveries') return get;
        if (dec[2] === 'cancel') return m === 'POST' && bk !== 'junk';
      }
      return false;
    }

    /** Real routes, as they are or with one change (a segment replaced, added, removed, %-encoded, upper-cased). */
    const template = fc.constantFrom<string[]>(
      ['job-types'],
      ['jobs'],
      ['jobs', 'OWN', 'status'],
      ['jobs', 'OWN_UPPER', 'status'],
      ['jobs', 'CANCELLED', 'status'],
      ['jobs', 'OTHERS', 'status'],
      ['jobs', 'OWN', 'result'],
      ['jobs', 'CANCELLED', 'result'],
      ['jobs', 'CANCELLED', 'cancel'],
      ['jobs', 'OTHERS', 'cancel'],
      ['jobs', 'OWN', 'webhook-deliveries'],
      ['jobs', 'OTHERS', 'webhook-deliveries'],
      ['jobs', 'CANCELLED', 'webhook-deliveries', 'RANDOM_UUID', 'redeliver'],
      ['jobs', 'submit', 'image-transform'],
      ['jobs', 'submit', 'image-face-swap'],
    );
    const encodeOne = (s: string, i: number) =>
      s.length === 0
        ? s
        : `${s.slice(0, i % s.length)}%${s
            .charCodeAt(i % s.length)
            .toString(16)
            .toUpperCase()
            .padStart(2, '0')}${s.slice((i % s.length) + 1)}`;
    const segments = fc.oneof(
      { weight: 3, arbitrary: template },
      {
        weight: 4,
        arbitrary: fc
          .tuple(
            template,
            fc.nat(),
            segment,
            fc.constantFrom('replace', 'insert', 'remove', 'encode', 'upper', 'double'),
          )
          .map(([t, i, seg, how]) => {
            const out = [...t];
            const at = i % out.length;
            if (how === 'replace') out[at] = seg;
            else if (how === 'insert') out.splice(at, 0, seg);
            else if (how === 'remove') out.splice(at, 1);
            else if (how === 'encode') out[at] = /^[A-Z_]+$/.test(out[at]!) ? out[at]! : encodeOne(out[at]!, i);
            else if (how === 'upper') out[at] = out[at]!.toUpperCase();
            else out.splice(at, 0, '');
            return out;
          }),
      },
      { weight: 3, arbitrary: fc.array(segment, { minLength: 0, maxLength: 6 }) },
    );

    await fc.assert(
      fc.asyncProperty(
        method,
        segments,
        fc.boolean(),
        query,
        bodyKind,
        fc.nat(7),
        async (m, rawSegs, trailing, q, bk, authPick) => {
          runs++;
          const segs = rawSegs.map((s) =>
            s === 'OWN'
              ? ownQueued
              : s === 'OWN_UPPER'
                ? ownQueued.toUpperCase()
                : s === 'CANCELLED'
                  ? ownCancelled
                  : s === 'OTHERS'
                    ? othersJob
                    : s === 'RANDOM_UUID'
                      ? '5b8e0f38-8f4e-4f0e-9b8f-2d1c3b4a5e6f'
                      : s === 'NIL_UUID'
                        ? '00000000-0000-0000-0000-000000000000'
                        : s,
          );
          const target = `/api/v1/${segs.join('/')}${trailing && segs.length > 0 ? '/' : ''}${q}`;
          const headers: Array<[string, string]> = authPick === 0 ? [] : [['Authorization', `Bearer ${key}`]];
          let body: string | undefined;
          if (bk === 'empty-json') body = '{}';
          if (bk === 'valid-submit')
            body = JSON.stringify({ job_type: 'image-transform', model: 'lanczos3', input: { source: VALID_URLS[0] } });
          if (bk === 'junk') body = '{"x":';
          if (body !== undefined) headers.push(['Content-Type', 'application/json']);
          // Cancelling the reference job would change what later cases expect: never cancel it.
          const cancelsOwn =
            m === 'POST' && segs.some((s) => s.toLowerCase() === ownQueued) && segs.some((s) => /cancel/i.test(s));
          if (cancelsOwn) return true;
          const res = await rawRequest(port, { method: m, target, headers, body });
          bump(counts, res.status);
          const ex = describeRequest(
            m,
            target,
            `${body ? `body=${body.slice(0, 60)} ` : ''}→ ${res.status} ${res.text.slice(0, 200)}`,
          );
          const problem = envelopeProblem(res, { head: m === 'HEAD' });
          if (problem) {
            v.add(`${normalise(problem)}: ${normalise(res.text.slice(0, 60))}`, ex);
            return;
          }
          if (res.status < 300) {
            ok2xx++;
            if (authPick === 0 || !mayBe2xx(m, [...segs, ...(trailing ? [''] : [])], q, bk))
              v.add(`unexpected ${res.status} for ${m}`, ex);
          }
          return true;
        },
      ),
      fcParams(RUNS.paths),
    );
    report('paths and methods', runs, counts, v, { '2xx answers (all allowed by the model)': ok2xx });
    expect(v.summary()).toEqual([]);
  });

  it(`query strings on the list and status routes (${RUNS.queries} cases)`, async () => {
    const v = new Violations();
    const counts = statusCounts();
    let runs = 0;
    const LIST_STATUSES = ['queued', 'processing', 'completed', 'failed', 'cancelled'];
    const name = fc.oneof(
      { weight: 6, arbitrary: fc.constantFrom('status', 'job_type', 'limit', 'cursor', 'wait') },
      {
        weight: 1,
        arbitrary: fc.constantFrom('x', '__proto__', 'constructor', 'hasOwnProperty', 'Limit', 'status[]', 'toString'),
      },
    );
    const value = fc.oneof(
      fc.constantFrom(
        ...LIST_STATUSES,
        'QUEUED',
        'done',
        'image-transform',
        'image-face-swap',
        'x'.repeat(100),
        'x'.repeat(101),
      ),
      fc.constantFrom(
        '1',
        '100',
        '0',
        '101',
        '-1',
        '1.5',
        'abc',
        '0x10',
        ' 5',
        '5 ',
        '1e2',
        '',
        'Infinity',
        'NaN',
        '007',
        '60',
        '61',
        '0.0',
      ),
      fc.constantFrom(
        'CURSOR',
        'abc',
        Buffer.from('12:00000000-0000-0000-0000-000000000000').toString('base64url'),
        Buffer.from('1:x').toString('base64url'),
        'a'.repeat(201),
        '%%%',
      ),
      fc.string({ unit: 'grapheme', maxLength: 10 }),
    );
    const pair = fc.tuple(name, value);

    /** z.coerce.number(): Number(value), arrays included. */
    const num = (x: string | string[]) => Number(x);
    const CURSOR_RE = /^(\d{1,16}):([0-9a-f-]{36})$/;
    function listValid(q: Map<string, string | string[]>): boolean {
      for (const [k, x] of q) {
        if (k === 'status') {
          if (typeof x !== 'string' || !LIST_STATUSES.includes(x)) return false;
        } else if (k === 'job_type') {
          if (typeof x !== 'string' || x.length < 1 || x.length > 100) return false;
        } else if (k === 'limit') {
          const n = num(x);
          if (!Number.isInteger(n) || n < 1 || n > 100) return false;
        } else if (k === 'cursor') {
          if (
            typeof x !== 'string' ||
            x.length < 1 ||
            x.length > 200 ||
            !CURSOR_RE.test(Buffer.from(x, 'base64url').toString())
          )
            return false;
        } else return false;
      }
      return true;
    }
    function statusValid(q: Map<string, string | string[]>): boolean {
      for (const [k, x] of q) {
        if (k !== 'wait') return false;
        const n = num(x);
        if (!Number.isInteger(n) || n < 0 || n > 60) return false;
      }
      return true;
    }

    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('list', 'status-cancelled', 'status-queued'),
        fc.array(pair, { maxLength: 4 }),
        async (route, pairs) => {
          runs++;
          // A valid positive wait on a queued job would hold the request open (long poll): keep those off it.
          if (route === 'status-queued')
            pairs = pairs.filter(([k, x]) => !(k === 'wait' && Number.isInteger(Number(x)) && Number(x) > 0));
          const q = new Map<string, string | string[]>();
          for (const [k, x0] of pairs) {
            const x = x0 === 'CURSOR' ? validCursor : x0;
            const prev = q.get(k);
            q.set(k, prev === undefined ? x : [...[prev].flat(), x]);
          }
          if (
            route === 'status-queued' &&
            [...q].some(([k, x]) => k === 'wait' && Number.isInteger(num(x)) && num(x) > 0)
          )
            return true;
          const qs = pairs
            .map(([k, x0]) => `${encodeURIComponent(k)}=${encodeURIComponent(x0 === 'CURSOR' ? validCursor : x0)}`)
            .join('&');
          const target =
            route === 'list'
              ? `/api/v1/jobs?${qs}`
              : `/api/v1/jobs/${route === 'status-queued' ? ownQueued : ownCancelled}/status?${qs}`;
          const valid = route === 'list' ? listValid(q) : statusValid(q);
          const res = await rawRequest(port, { method: 'GET', target, headers: [['Authorization', `Bearer ${key}`]] });
          bump(counts, res.status);
          const ex = describeRequest('GET', target, `→ ${res.status} ${res.text.slice(0, 200)}`);
          const problem = envelopeProblem(res);
          if (problem) {
            v.add(normalise(problem), ex);
            return;
          }
          if (valid && res.status !== 200) v.add(`valid query refused with ${res.status}`, ex);
          if (!valid && res.status !== 400) v.add(`invalid query answered ${res.status}`, ex);
          if (res.status === 200 && route === 'list') {
            const jobs = JSON.parse(res.text).data.jobs as Array<{ uuid: string; status: string }>;
            if (jobs.some((j) => j.uuid === othersJob)) v.add("another owner's job listed", ex);
            const st = q.get('status');
            if (typeof st === 'string' && jobs.some((j) => j.status !== st)) v.add('status filter not applied', ex);
          }
          return true;
        },
      ),
      fcParams(RUNS.queries),
    );
    report('query strings', runs, counts, v);
    expect(v.summary()).toEqual([]);
  });

  it('is still healthy afterwards: /healthz, /readyz, a valid submit, status of earlier jobs, no prototype pollution', async () => {
    expect((await svc.call('GET', '/healthz')).status).toBe(200);
    expect((await svc.call('GET', '/readyz')).status).toBe(200);
    const r = await svc.call('POST', SUBMIT, {
      body: { job_type: 'image-transform', model: 'lanczos3', input: { source: VALID_URLS[0] } },
    });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toMatchObject({ code: 0, message: 'ok', data: { status: 'queued' } });
    const s = await svc.call('GET', `/api/v1/jobs/${ownQueued}/status`);
    expect(s.body.data.status).toBe('queued');
    expect((await svc.call('GET', `/api/v1/jobs/${ownCancelled}/status`)).body.data.status).toBe('cancelled');
    // The service ran in this process: nothing leaked onto Object.prototype.
    const probe = {} as Record<string, unknown>;
    expect([probe.polluted, probe.width, probe.x]).toEqual([undefined, undefined, undefined]);
    figures['total cases'] = totalCases(figures);
    figures['seed'] = SEED;
    figures['healthy afterwards'] = 'GET /healthz 200, GET /readyz 200, valid submit 200, Object.prototype clean';
  });
});

// --- Regressions: one focused test per class of problem the fuzzers found ------------------------

describe('regressions found by the fuzzers', () => {
  it('accepts Content-Type: application/json with parameters (charset), as JSON', async () => {
    const body = JSON.stringify({ job_type: 'image-transform', model: 'lanczos3', input: { source: VALID_URLS[0] } });
    const seen: Record<string, number> = {};
    for (const ct of [
      'application/json; charset=utf-8',
      'application/json;charset=UTF-8',
      'application/vnd.api+json; charset=utf-8',
    ]) {
      const res = await rawRequest(port, {
        method: 'POST',
        target: SUBMIT,
        headers: [
          ['Authorization', `Bearer ${key}`],
          ['Content-Type', ct],
        ],
        body,
      });
      seen[ct] = res.status;
    }
    // .NET's JsonContent and OkHttp send exactly the first one.
    expect(seen).toEqual({
      'application/json; charset=utf-8': 200,
      'application/json;charset=UTF-8': 200,
      'application/vnd.api+json; charset=utf-8': 200,
    });
  });

  it('answers deeply nested JSON with 400, not 500', async () => {
    const results: Record<string, number> = {};
    for (const depth of [3000, 10_000, 200_000]) {
      const nested = `${'['.repeat(depth)}${']'.repeat(depth)}`;
      const inInput = `{"job_type":"image-transform","model":"lanczos3","input":{"source":"${VALID_URLS[0]}","extra":${nested}}}`;
      for (const [where, text] of [
        ['top level', nested],
        ['input.extra', inInput],
      ] as const) {
        const res = await rawRequest(port, {
          method: 'POST',
          target: SUBMIT,
          headers: [
            ['Authorization', `Bearer ${key}`],
            ['Content-Type', 'application/json'],
          ],
          body: text,
        });
        results[`${where}, depth ${depth}`] = res.status;
      }
    }
    expect(results).toEqual(Object.fromEntries(Object.keys(results).map((k) => [k, 400])));
  });

  it('answers path errors the router raises itself (bad %-encoding, over-long parameters) with the envelope', async () => {
    const cases = [
      `/api/v1/jobs/%zz/status`,
      `/api/v1/jobs/%E0%A4%A/status`,
      `/api/v1/%`,
      `/api/v1/jobs/${'a'.repeat(150)}/status`,
      `/api/v1/jobs/submit/${'b'.repeat(150)}`,
      `/api/v1/jobs/${ownQueued}/webhook-deliveries/${'c'.repeat(120)}/redeliver`,
    ];
    const problems: string[] = [];
    for (const target of cases) {
      const method = target.includes('submit') || target.includes('redeliver') ? 'POST' : 'GET';
      const res = await rawRequest(port, {
        method,
        target,
        headers: [
          ['Authorization', `Bearer ${key}`],
          ...(method === 'POST' ? [['Content-Type', 'application/json'] as [string, string]] : []),
        ],
        body: method === 'POST' ? '{}' : undefined,
      });
      const p = envelopeProblem(res);
      if (p || res.status >= 500)
        problems.push(`${method} ${target.slice(0, 60)} → ${res.status} ${p ?? ''} ${res.text.slice(0, 120)}`);
    }
    expect(problems).toEqual([]);
  });

  it('answers malformed HTTP (what the parser and Node reject before routing) with the envelope', async () => {
    const auth: [string, string] = ['Authorization', `Bearer ${key}`];
    const json: [string, string] = ['Content-Type', 'application/json'];
    const body = JSON.stringify({ job_type: 'image-transform', model: 'lanczos3', input: { source: VALID_URLS[0] } });
    const cases: Array<[string, RawRequestSpec]> = [
      [
        'control byte in Idempotency-Key',
        { method: 'POST', target: SUBMIT, headers: [auth, json, ['Idempotency-Key', Buffer.from([0x6b, 0x01])]], body },
      ],
      [
        'control byte in Authorization',
        {
          method: 'GET',
          target: '/api/v1/jobs',
          headers: [['Authorization', Buffer.concat([Buffer.from(`Bearer ${key}`), Buffer.from([0x02])])]],
        },
      ],
      ['unknown method token', { method: 'FOO', target: '/api/v1/jobs', headers: [auth] }],
      ['lower-case method', { method: 'get', target: '/api/v1/jobs', headers: [auth] }],
      [
        'raw UTF-8 bytes in the path',
        { method: 'GET', target: Buffer.from('/api/v1/jobs/é/status', 'utf8'), headers: [auth] },
      ],
      ['space in the path', { method: 'GET', target: '/api/v1/jobs /status', headers: [auth] }],
      ['request line over 16 KB', { method: 'GET', target: `/api/v1/${'a'.repeat(20_000)}`, headers: [auth] }],
      [
        'header over 16 KB',
        { method: 'GET', target: '/api/v1/jobs', headers: [auth, ['X-Request-Id', 'r'.repeat(20_000)]] },
      ],
      [
        'Content-Length and Transfer-Encoding',
        {
          method: 'POST',
          target: SUBMIT,
          headers: [auth, json, ['Transfer-Encoding', 'chunked'], ['Content-Length', String(body.length)]],
          body,
        },
      ],
      [
        'Content-Length not a number',
        {
          method: 'POST',
          target: SUBMIT,
          headers: [auth, json, ['Content-Length', 'abc']],
          body,
          contentLength: false,
        },
      ],
      ['HTTP/1.1 without Host', { method: 'GET', target: '/api/v1/jobs', headers: [auth], noHost: true }],
      [
        'unsupported Expect',
        { method: 'POST', target: SUBMIT, headers: [auth, json, ['Expect', 'something-else']], body },
      ],
    ];
    const problems: string[] = [];
    const statuses: Record<string, number> = {};
    for (const [name, spec] of cases) {
      const res = await rawRequest(port, spec);
      statuses[name] = res.status;
      const p = envelopeProblem(res);
      if (p) problems.push(`${name}: HTTP ${res.status}: ${p}: ${JSON.stringify(res.text.slice(0, 120))}`);
    }
    figures['malformed HTTP: statuses'] = statuses;
    expect((await svc.call('GET', '/healthz')).status).toBe(200);
    expect(problems).toEqual([]);
  });
});
