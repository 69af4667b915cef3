/**
 * Fuzzing the owner webhook endpoint routes with fast-check (fixed seed, reproducible), against a
 * model of their contract written from the README and docs/webhooks.md, as fuzz.spec.ts does for
 * submits: every answer is the envelope, 2xx or 4xx, never 5xx; a 2xx only for a request the model
 * calls valid, and a 400 for one it calls invalid. Covered: register and change bodies (random,
 * near-valid, unknown fields, every URL the address rule refuses), the endpoint id in every route
 * (another owner's, deleted, made up, odd bytes), recover's `since` and the delivery log's query.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type TestService } from '../helpers/service.js';
import {
  caseCounts,
  DNS,
  EVENTS,
  has,
  isObj,
  type Obj,
  validEvents,
  envelopeProblem,
  INVALID_URLS,
  normalise,
  rawRequest,
  recordFigures,
  SEED,
  fcParams,
  totalCases,
  validUrl,
  VALID_URLS,
  Violations,
} from './support.js';

const RUNS = caseCounts({ create: 1500, change: 800, ids: 1500 });
const ENDPOINTS = '/api/v1/webhook-endpoints';

let svc: TestService;
let port: number;
let otherKey: string;
/** The caller's endpoint that the change and id properties use, another owner's, and a deleted one. */
let own: string;
let others: string;
let deleted: string;
const figures: Record<string, unknown> = {};

// --- The model ----------------------------------------------------------------------------------

/** At most 256 characters: code points, so an emoji counts one (not its two UTF-16 units). */
const validDescription = (d: unknown) => typeof d === 'string' && Array.from(d).length <= 256;

/** A field of a register or change body, as the README and docs/webhooks.md describe it. */
function validField(k: string, v: unknown): boolean {
  if (k === 'url') return validUrl(v);
  if (k === 'events') return validEvents(v);
  if (k === 'description') return validDescription(v);
  return false; // unknown fields are refused
}

/** POST /webhook-endpoints: a url, and optionally events and a description; nothing else. */
const validCreate = (b: unknown) => isObj(b) && has(b, 'url') && Object.entries(b).every(([k, v]) => validField(k, v));
/** PATCH /webhook-endpoints/{id}: at least one of the same fields; nothing else. */
const validChange = (b: unknown) =>
  isObj(b) && Object.keys(b).length > 0 && Object.entries(b).every(([k, v]) => validField(k, v));

// --- Arbitraries ----------------------------------------------------------------------------------

const oddValue = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.constantFrom(null, true, 0, -1, 1.5, '', [], {}, ['job.completed', 'job.completed'], ['job.done'], ['JOB.FAILED']),
  fc.constantFrom('x'.repeat(256), 'x'.repeat(257), '😀'.repeat(128), '😀'.repeat(129), '\u0000', '\u202e'),
  fc.constantFrom(...VALID_URLS, ...INVALID_URLS),
);
const field = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('url', 'events', 'description') },
  {
    weight: 1,
    arbitrary: fc.constantFrom('secret', 'status', 'id', 'URL', 'event', '__proto__', 'constructor', 'disabled', ''),
  },
);
const goodFields = fc.record(
  {
    url: fc.constantFrom(...VALID_URLS),
    events: fc.subarray([...EVENTS], { minLength: 1 }),
    description: fc.string({ unit: 'grapheme', maxLength: 60 }),
  },
  { requiredKeys: [] },
);
/** Near-valid bodies: good fields, then some replaced, removed or added. */
const body = fc
  .tuple(goodFields, fc.array(fc.tuple(field, fc.option(oddValue, { nil: undefined })), { maxLength: 3 }))
  .map(([good, edits]) => {
    const b: Obj = { ...good };
    for (const [k, v] of edits) {
      if (v === undefined) Reflect.deleteProperty(b, k);
      else Object.defineProperty(b, k, { value: v, enumerable: true, writable: true, configurable: true });
    }
    return b;
  });
const anyBody = fc.oneof(
  { weight: 6, arbitrary: body.map((b) => JSON.stringify(b)) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v) ?? 'null') },
  { weight: 1, arbitrary: body.map((b) => JSON.stringify(b).slice(0, -1)) }, // truncated: not JSON
);

// --- Requests ---------------------------------------------------------------------------------------

async function send(method: string, target: string, text?: string, key = svc.key) {
  const headers: Array<[string, string]> = [['Authorization', `Bearer ${key}`]];
  if (text !== undefined) headers.push(['Content-Type', 'application/json']);
  return rawRequest(port, { method, target, headers, body: text });
}

/** The model's verdict on a JSON text: true (valid), false (invalid), or undefined when it is not JSON. */
function verdict(text: string, valid: (b: unknown) => boolean): boolean | undefined {
  try {
    return valid(JSON.parse(text));
  } catch {
    return undefined;
  }
}

const statusCounts = new Map<string, Record<number, number>>();
function count(name: string, status: number): void {
  const m = statusCounts.get(name) ?? {};
  m[status] = (m[status] ?? 0) + 1;
  statusCounts.set(name, m);
}
const example = (method: string, target: string, text: string | undefined, status: number, answer: string) =>
  `${method} ${target} ${text === undefined ? '' : text.slice(0, 300)} → ${status} ${answer.slice(0, 200)}`;

beforeAll(async () => {
  svc = await startService(
    { WORKER_CONCURRENCY: '0', MEDIA_ALLOW_PRIVATE_NETWORKS: 'false', RATE_LIMIT_SUBMIT: '0', RATE_LIMIT_READ: '0' },
    { lookup: DNS },
  );
  port = Number(new URL(svc.base).port);
  otherKey = await svc.newKey('mallory');
  const create = async (key: string) =>
    (await svc.call('POST', ENDPOINTS, { body: { url: VALID_URLS[0] }, key })).body.data.id as string;
  own = await create(svc.key);
  others = await create(otherKey);
  deleted = await create(svc.key);
  expect((await svc.call('DELETE', `${ENDPOINTS}/${deleted}`)).status).toBe(200);
});

afterAll(async () => {
  recordFigures('endpoint fuzzing', {
    ...figures,
    'total cases': totalCases(figures),
    seed: SEED,
    statuses: Object.fromEntries(statusCounts),
  });
  await svc?.stop();
});

describe('fuzzing the webhook endpoint routes (fast-check, seed fixed)', () => {
  /**
   * One body property: each text sent to `target`, its answer the envelope, `ok` exactly when the
   * model calls the body valid (else 400); `accepted` checks what an accepted body did.
   */
  async function bodies(
    name: string,
    runs: number,
    [method, target, ok]: [string, string, number],
    valid: (b: unknown) => boolean,
    accepted: (sent: Obj, data: Obj, ex: string, v: Violations) => Promise<void>,
  ): Promise<void> {
    const v = new Violations();
    let applied = 0;
    await fc.assert(
      fc.asyncProperty(anyBody, async (text) => {
        const res = await send(method, target, text);
        count(name, res.status);
        const ex = example(method, target, text, res.status, res.text);
        const expected = verdict(text, valid) ? ok : 400;
        const problem = envelopeProblem(res);
        if (problem) v.add(normalise(problem), ex);
        else if (res.status !== expected) v.add(`${name}: expected ${expected}, got ${res.status}`, ex);
        else if (res.status === ok) {
          applied++;
          await accepted(JSON.parse(text) as Obj, JSON.parse(res.text).data as Obj, ex, v);
        }
        return true;
      }),
      fcParams(runs, 120_000),
    );
    figures[`${name}: cases`] = runs;
    figures[`${name}: accepted (valid by the model)`] = applied;
    figures[`${name}: violations`] = v.size === 0 ? 0 : v.summary();
    expect(applied).toBeGreaterThan(runs / 10);
    expect(v.summary()).toEqual([]);
  }

  it(`register bodies (${RUNS.create} cases): 201 exactly when the model says valid, else 400`, async () => {
    await bodies('register', RUNS.create, ['POST', ENDPOINTS, 201], validCreate, async (sent, d, ex, v) => {
      const events = has(sent, 'events') ? sent.events : EVENTS;
      if (
        !/^ep_[0-9a-f]+$/.test(String(d.id)) ||
        !/^whsec_/.test(String(d.secret)) ||
        d.status !== 'enabled' ||
        JSON.stringify([...(d.events as string[])].sort()) !== JSON.stringify([...(events as string[])].sort())
      )
        v.add('register: the endpoint answered is not the one asked for', ex);
      // At most 20 per owner: each one made here goes again at once.
      const gone = await send('DELETE', `${ENDPOINTS}/${String(d.id)}`);
      if (gone.status !== 200) v.add(`delete after register: ${gone.status}`, ex);
    });
  });

  it(`change bodies (${RUNS.change} cases): 200 exactly when the model says valid, and the change is kept`, async () => {
    const target = `${ENDPOINTS}/${own}`;
    await bodies('change', RUNS.change, ['PATCH', target, 200], validChange, async (sent, _d, ex, v) => {
      const now = (await svc.call('GET', target)).body.data as Obj;
      for (const k of ['events', 'description'] as const)
        if (has(sent, k) && JSON.stringify(now[k]) !== JSON.stringify(sent[k]))
          v.add(`change: ${k} not kept`, `${ex} → now ${JSON.stringify(now[k])}`);
    });
  });

  it(`ids, recover times and log queries (${RUNS.ids} cases): the caller's own endpoint only, never a 5xx`, async () => {
    const v = new Violations();
    const id = fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom('OWN', 'OTHERS', 'DELETED') },
      {
        weight: 2,
        arbitrary: fc.oneof(
          fc.stringMatching(/^ep_[0-9a-f]{24}$/),
          fc.constantFrom(
            'ep_',
            'EP_X',
            '0',
            '-1',
            'null',
            '%2e%2e',
            '..%2F..%2Fjobs',
            '%C3%A9',
            '%F0%9F%98%80',
            'a'.repeat(5000),
          ),
          fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 30 }).map(encodeURIComponent),
        ),
      },
    );
    const isoSince = fc
      .date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2100-01-01T00:00:00Z'), noInvalidDate: true })
      .chain((d) =>
        fc.constantFrom(
          d.toISOString(),
          d.toISOString().replace('Z', '+00:00'),
          d.toISOString().replace(/\.\d{3}Z$/, '-05:30'),
        ),
      );
    const badSince = fc.oneof(
      fc.constantFrom('2026-01-01', '2026-01-01T00:00:00', 'yesterday', '', '2026-13-01T00:00:00Z', '1700000000'),
      fc.string({ maxLength: 12 }).filter((s) => !/\d{4}-\d{2}-\d{2}T/.test(s)),
      fc.constantFrom(0, null, true, ['2026-01-01T00:00:00Z'], { at: '2026-01-01T00:00:00Z' }),
    );
    const limit = fc.oneof(
      fc.integer({ min: 1, max: 100 }).map(String),
      fc.constantFrom('0', '101', '-1', '1.5', 'abc', '', '1e1', ' 5', '0x10', '9'.repeat(30)),
    );
    /** A request on one endpoint; `valid` is the model's verdict on its body or query. */
    interface Route {
      method: string;
      path: string;
      text?: string;
      valid: boolean;
    }
    const route: fc.Arbitrary<Route> = fc.oneof(
      fc.constant({ method: 'GET', path: '', valid: true }),
      fc.constant({ method: 'PATCH', path: '', text: JSON.stringify({ description: 'fuzz' }), valid: true }),
      fc.constant({ method: 'POST', path: '/rotate-secret', valid: true }),
      fc.constant({ method: 'POST', path: '/enable', valid: true }),
      fc
        .oneof(
          isoSince.map((since) => ({ since: since, valid: true })),
          badSince.map((since) => ({ since: since, valid: false })),
        )
        .map(({ since, valid }) => ({ method: 'POST', path: '/recover', text: JSON.stringify({ since }), valid })),
      fc
        .tuple(fc.option(limit, { nil: undefined }), fc.option(fc.string({ maxLength: 40 }), { nil: undefined }))
        .map(([l, c]) => {
          const q = new URLSearchParams();
          if (l !== undefined) q.set('limit', l);
          if (c !== undefined) q.set('cursor', c);
          const n = Number(l ?? '50');
          return {
            method: 'GET',
            path: `/deliveries?${q.toString()}`,
            valid: Number.isInteger(n) && n >= 1 && n <= 100,
          };
        }),
      fc.constant({ method: 'DELETE', path: '', valid: true }),
    );
    let ownAnswers = 0;
    await fc.assert(
      fc.asyncProperty(id, route, fc.boolean(), async (which, r, asOther) => {
        // The other owner only ever asks about the caller's endpoint (its own stays as it was made),
        // and the caller's own endpoint is never deleted here (the change property uses it).
        if (which === 'OTHERS' && asOther) return true;
        const reachable = which === 'OWN' && !asOther;
        if (reachable && r.method === 'DELETE') return true;
        const idText = which === 'OWN' ? own : which === 'OTHERS' ? others : which === 'DELETED' ? deleted : which;
        const target = `${ENDPOINTS}/${idText}${r.path}`;
        const res = await send(r.method, target, r.text, asOther ? otherKey : svc.key);
        count(`ids ${r.method} ${r.path.split('?')[0] || '/'}`, res.status);
        const ex = example(r.method, target.slice(0, 200), r.text, res.status, res.text);
        const problem = envelopeProblem(res);
        // A made-up cursor on the caller's log may be refused, saying so.
        const refusedCursor = r.path.includes('cursor=') && res.status === 400 && /cursor/.test(res.text);
        if (problem) v.add(normalise(problem), ex);
        else if (!reachable) {
          // Another owner's, deleted or made up: a 404 like a missing one (a 400 only for a bad body or
          // query, a 414 for a path segment over 100 characters, docs/api.md).
          const expected = idText.length > 100 ? 414 : 404;
          if (res.status !== expected && !(res.status === 400 && !r.valid))
            v.add(`not the caller's endpoint (${r.valid ? 'valid' : 'invalid'} request): ${res.status}`, ex);
        } else {
          ownAnswers++;
          if (!r.valid && res.status !== 400) v.add(`the caller's endpoint, an invalid request: ${res.status}`, ex);
          else if (r.valid && res.status !== 200 && !refusedCursor)
            v.add(`the caller's endpoint, a valid request: ${res.status}`, ex);
        }
        return true;
      }),
      fcParams(RUNS.ids, 120_000),
    );
    figures['ids: cases'] = RUNS.ids;
    figures["ids: answered about the caller's own endpoint"] = ownAnswers;
    figures['ids: violations'] = v.size === 0 ? 0 : v.summary();
    expect(v.summary()).toEqual([]);
    // Nothing of another owner's changed: its endpoint is as it was made.
    const theirs = (await svc.call('GET', `${ENDPOINTS}/${others}`, { key: otherKey })).body.data;
    expect([theirs.url, theirs.description, theirs.status]).toEqual([VALID_URLS[0], '', 'enabled']);
  });
});
