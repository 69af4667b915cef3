import { JOB_NOT_FOUND, isTerminalStatus, type ApiJob, type JobStatus, type ResultLink } from '../contract/api.js';
import { v7 as timeOrderedUuid } from 'uuid';
import type { Kysely } from 'kysely';
import type { z } from 'zod';
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import { DomainError, conflict, gone, invalid, notFound } from '../errors.js';
import { checkUrl, type LookupAll } from '../media/index.js';
import type { Catalogue } from '../processors/catalogue.js';
import type { Metrics } from '../metrics.js';
import { wakeOn, type Signals } from '../signals.js';
import type { ResultStore } from '../storage/types.js';
import type { Store } from '../store/store.js';
import { findIdempotencyKey, findIdempotencyKeys, type IdempotencyRow } from '../store/idempotency.js';
import { getJobView, jobViewReader, jobsAhead, listJobs, type NewJob } from '../store/jobs.js';
import { UnchangedReads } from '../store/unchanged-reads.js';
import { sqliteHandle } from '../store/db.js';
import { parseSubmitDuration } from './durations.js';
import { purgeJob } from './purge.js';
import type { Database } from '../store/schema.js';
import { checkIdempotencyKey, requestFingerprint } from './idempotency.js';
import { describeIssues, isSlotName, submitSchema, type SubmitBody } from './submit-schema.js';
import type { JobLifecycle } from './lifecycle.js';
import { newJob } from './moves.js';
import { toApiJob, type JobView } from './view.js';

export interface SubmitRequest {
  owner: string;
  jobType: string;
  body: unknown;
  idempotencyKey?: string;
  requestId: string;
  /** Method and path, for the idempotency fingerprint. */
  method: string;
  path: string;
}

/** What the HTTP layer sends back: stored verbatim for idempotent replays. */
export interface SubmitOutcome {
  statusCode: number;
  body: { code: 0; message: 'ok'; data: ApiJob };
  requestId: string;
  replayed: boolean;
}

/** A batch read and checked up to its inserts (JobService.planBatch). */
export interface BatchPlan {
  owner: string;
  items: Array<SubmitRequest | DomainError>;
  /** Live idempotency records of the items' keys. */
  priors: Map<string, IdempotencyRow>;
  /** Items that do not replay a stored submit: what the rate limit counts. */
  fresh: number;
}

/** A submit ready to insert (see JobService.prepare). */
interface Prepared {
  row: NewJob;
  /** The key's record (a batch reserves its items' keys together). */
  record?: IdempotencyRow;
  outcome: SubmitOutcome;
  fingerprint: string;
  /** A batch item whose key an earlier item of the same batch holds: answered after the insert. */
  later: boolean;
}

export interface JobServiceDeps {
  store: Store;
  catalogue: Catalogue;
  config: Config;
  clock: Clock;
  results: ResultStore;
  lifecycle: JobLifecycle;
  signals: Signals;
  metrics?: Metrics;
  /** DNS for submit-time URL checks; tests inject one. */
  lookup?: LookupAll;
}

const DATA_REMOVED = "the job's data was deleted (DELETE /api/v1/jobs/{uuid}, or its retention period ended)";
/** Echo a client's text only in part: a 1 MB value must not make a 1 MB error message. */
const clip = (text: string) => (text.length > 64 ? `${text.slice(0, 64)}…` : text);
/** Queue position is exact up to this many jobs ahead; beyond it the status says "more than". */
export const POSITION_CAP = 1000;

/** The four operations of the public API, independent of HTTP. */
export class JobService {
  private readonly schemas = new Map<string, z.ZodType>();
  private readonly db: Kysely<Database>;
  /** SQLite: status reads answered from memory while the database is unchanged (made at the first; null: PostgreSQL). */
  private statusReads: UnchangedReads<ApiJob | JobView> | null | undefined;

  constructor(private readonly deps: JobServiceDeps) {
    this.db = deps.store.db;
    for (const type of deps.catalogue.list()) {
      this.schemas.set(
        type.name,
        submitSchema(type, {
          allowPrivate: deps.config.mediaAllowPrivateNetworks,
          maxRetentionMs: deps.config.resultRetentionMs,
        }),
      );
    }
  }

  /** MAX_BATCH_ITEMS: the most items of one POST /jobs/batch. */
  get maxBatchItems(): number {
    return this.deps.config.maxBatchItems;
  }

  async submit(req: SubmitRequest): Promise<SubmitOutcome> {
    const prepared = await this.prepare(req, 'look');
    if ('replayed' in prepared) return prepared;
    // The key's record goes with the job (as a batch item's): concurrent submits then share one
    // reservation statement and one multi-row INSERT in the writer's transaction.
    const [created] = await this.deps.lifecycle.createMany([{ job: prepared.row, key: prepared.record }]);
    if (created) return prepared.outcome;
    return this.lost(req, prepared.fingerprint);
  }

  /**
   * POST /jobs/batch, first half: each item as a submit of its own (its `job_type`, its key:
   * `idempotency_key`, else `KEY:INDEX` of the batch's key) or the DomainError it alone gets, and
   * the live idempotency records of their keys (one read). Done before the rate limit, so items
   * that replay a stored submit are not counted again (`fresh`).
   */
  async planBatch(req: {
    owner: string;
    items: readonly unknown[];
    batchKey?: string;
    requestId: string;
  }): Promise<BatchPlan> {
    const { owner } = req;
    const asItem = (raw: unknown, i: number): SubmitRequest => {
      if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw invalid('item must be a JSON object');
      const { idempotency_key: own, ...body } = raw as Record<string, unknown>;
      if (own !== undefined && typeof own !== 'string') throw invalid('idempotency_key: must be a string');
      const jobType = (body as { job_type?: unknown }).job_type;
      if (jobType === undefined) throw invalid('job_type: is required');
      if (typeof jobType !== 'string') throw invalid('job_type: must be a string');
      const key = own ?? (req.batchKey === undefined ? undefined : `${req.batchKey}:${i}`);
      return {
        owner,
        jobType,
        body,
        idempotencyKey: checkIdempotencyKey(key, own === undefined ? 'Idempotency-Key' : 'idempotency_key'),
        requestId: req.requestId,
        method: 'POST',
        path: `/api/v1/jobs/submit/${jobType}`,
      };
    };
    const items = req.items.map((raw, i) => {
      try {
        return asItem(raw, i);
      } catch (err) {
        return err as DomainError;
      }
    });
    const keys = items.flatMap((it) =>
      it instanceof DomainError || it.idempotencyKey === undefined ? [] : [it.idempotencyKey],
    );
    const priors = await findIdempotencyKeys(this.db, owner, keys, this.deps.clock.now());
    const fresh = items.filter((it) => it instanceof DomainError || !priors.has(it.idempotencyKey ?? '')).length;
    return { owner, items, priors, fresh };
  }

  /**
   * POST /jobs/batch, second half: the valid new items are created in one transaction
   * (lifecycle.createMany). Answers, in order, each item's outcome or the DomainError it alone
   * would have got; a database outage fails the whole batch.
   */
  async submitBatch(plan: BatchPlan): Promise<Array<SubmitOutcome | DomainError>> {
    const { items, priors } = plan;
    // A key given twice in one batch: the first item takes it, the others are its replays (or 409).
    const seen = new Set<string>();
    const prepared = await Promise.all(
      items.map(async (it) => {
        if (it instanceof DomainError) return it;
        const key = it.idempotencyKey;
        const repeat = key !== undefined && seen.has(key);
        if (key !== undefined) seen.add(key);
        try {
          return await this.prepare(it, repeat ? 'later' : (priors.get(key ?? '') ?? null));
        } catch (err) {
          if (err instanceof DomainError && err.kind !== 'unavailable') return err;
          throw err;
        }
      }),
    );
    const fresh = prepared.flatMap((p, i) =>
      p instanceof DomainError || 'replayed' in p || p.later ? [] : [{ p, i }],
    );
    const created = await this.deps.lifecycle.createMany(fresh.map(({ p }) => ({ job: p.row, key: p.record })));
    const out: Array<SubmitOutcome | DomainError | undefined> = prepared.map((p) =>
      p instanceof DomainError || 'replayed' in p ? p : undefined,
    );
    fresh.forEach(({ p, i }, j) => {
      if (created[j]) out[i] = p.outcome;
    });
    // What is left: repeats within the batch and keys taken concurrently, answered as replays.
    return Promise.all(
      out.map(async (o, i) => {
        if (o !== undefined) return o;
        const p = prepared[i] as Prepared;
        try {
          return await this.lost(items[i] as SubmitRequest, p.fingerprint);
        } catch (err) {
          if (err instanceof DomainError && err.kind !== 'unavailable') return err;
          throw err;
        }
      }),
    );
  }

  /**
   * A submit up to its insert: the replay of a live key (or its 409), else the validated row, its
   * key's reservation and the response to store with it. `prior`: 'look' reads the key here,
   * null/a row is what a batch read for it, 'later' defers to the batch's earlier item with the key.
   */
  private async prepare(
    req: SubmitRequest,
    prior: 'look' | 'later' | IdempotencyRow | null,
  ): Promise<Prepared | SubmitOutcome> {
    const { owner, idempotencyKey: key } = req;
    const schema = this.schemas.get(req.jobType);
    if (!schema) throw notFound(`unknown job type "${clip(req.jobType)}"; GET /api/v1/job-types lists them`);
    // Only a keyed submit is ever compared with another (canonical JSON and SHA-256 cost per request).
    const fingerprint = key === undefined ? '' : requestFingerprint(req.method, req.path, req.body);

    if (key !== undefined && prior !== 'later') {
      const found = prior === 'look' ? await findIdempotencyKey(this.db, owner, key, this.deps.clock.now()) : prior;
      if (found) return this.replay(found, fingerprint);
    }

    const body = await this.validate(req.jobType, schema, req.body);
    const now = this.deps.clock.now();
    const cancelAfter = body.cancel_after === undefined ? undefined : parseSubmitDuration(body.cancel_after);
    const retention = body.retention === undefined ? undefined : parseSubmitDuration(body.retention);
    const row = newJob({
      // Time-ordered and monotonic in this process: two jobs of one owner made in the same
      // millisecond keep their submission order where the queue breaks a tie by uuid.
      uuid: timeOrderedUuid(),
      owner,
      job_type: body.job_type,
      model: body.model,
      input: JSON.stringify(body.input),
      webhook: body.webhook ? JSON.stringify(body.webhook) : null,
      created_at: now,
      updated_at: now,
      deadline: cancelAfter === undefined ? null : now + cancelAfter,
      priority: body.priority ?? 0,
      retention_ms: retention ?? null,
    });
    const outcome: SubmitOutcome = {
      statusCode: 200,
      body: { code: 0, message: 'ok', data: toApiJob(row) },
      requestId: req.requestId,
      replayed: false,
    };

    const record: IdempotencyRow | undefined =
      key === undefined
        ? undefined
        : {
            owner,
            key,
            fingerprint,
            response_status: outcome.statusCode,
            response_body: JSON.stringify(outcome.body),
            request_id: req.requestId,
            job_uuid: row.uuid,
            created_at: now,
            expires_at: now + this.deps.config.idempotencyTtlMs,
          };
    return { row, record, outcome, fingerprint, later: prior === 'later' };
  }

  /** A key taken by a concurrent request (or an earlier item of the batch): answer as its replay. */
  private async lost(req: SubmitRequest, fingerprint: string): Promise<SubmitOutcome> {
    const prior = await findIdempotencyKey(this.db, req.owner, req.idempotencyKey!, this.deps.clock.now());
    if (!prior) throw conflict('Idempotency-Key: a request with this key is in progress; retry');
    return this.replay(prior, fingerprint);
  }

  private replay(
    prior: { fingerprint: string; response_status: number; response_body: string; request_id: string },
    fingerprint: string,
  ): SubmitOutcome {
    if (prior.fingerprint !== fingerprint) {
      throw conflict('Idempotency-Key: already used with a different request; use a new key for a new request');
    }
    return {
      statusCode: prior.response_status,
      body: JSON.parse(prior.response_body) as SubmitOutcome['body'],
      requestId: prior.request_id,
      replayed: true,
    };
  }

  /** Schema first (shape, models, URL syntax), then DNS for every URL: all or nothing. */
  private async validate(jobType: string, schema: z.ZodType, raw: unknown): Promise<SubmitBody> {
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
      throw invalid('body must be a JSON object');
    }
    const bodyType = (raw as { job_type?: unknown }).job_type;
    if (typeof bodyType === 'string' && bodyType !== jobType) {
      throw invalid(`job_type: must equal the path's job type "${jobType}" (got "${clip(bodyType)}")`);
    }
    const parsed = schema.safeParse(raw);
    if (!parsed.success) {
      throw invalid(describeIssues(parsed.error.issues, raw));
    }
    const body = parsed.data as SubmitBody;
    const urls: Array<[string, string]> = [];
    for (const [slot, value] of Object.entries(body.input)) {
      if (!isSlotName(slot)) continue;
      const list = value as string[];
      const single = !Array.isArray((raw as { input: Record<string, unknown> }).input[slot]);
      list.forEach((u, i) => urls.push([single ? `input.${slot}` : `input.${slot}[${i}]`, u]));
    }
    if (body.webhook) urls.push(['webhook.url', body.webhook.url]);
    if (urls.length === 0) return body;
    const checks = await Promise.all(
      urls.map(async ([field, u]) => {
        const r = await checkUrl(u, {
          allowPrivate: this.deps.config.mediaAllowPrivateNetworks,
          lookup: this.deps.lookup,
        });
        return r.ok ? undefined : `${field}: must be a public http or https URL (${r.reason})`;
      }),
    );
    const firstBad = checks.find((c) => c !== undefined);
    if (firstBad) throw invalid(firstBad);
    return body;
  }

  /**
   * The job, after waiting up to `waitMs` for it to reach a terminal state (long poll). Wakes on
   * the job-finished signal (from any process on PostgreSQL) and re-reads at least every second.
   */
  async status(owner: string, uuid: string, waitMs = 0): Promise<ApiJob> {
    // Listening before the first read: a finish between the read and the wait is not missed.
    const finished = waitMs > 0 ? wakeOn(this.deps.signals, 'job-finished', (u) => u === uuid) : undefined;
    try {
      let row = await getJobView(this.db, uuid, owner);
      if (!row) throw notFound(JOB_NOT_FOUND);
      // A wait is an interval of real time (monotonic), whatever the service clock says.
      const deadline = performance.now() + waitMs;
      for (
        let left = waitMs;
        finished && !isTerminalStatus(row.status) && left > 0;
        left = deadline - performance.now()
      ) {
        await finished.wait(Math.min(1000, left));
        row = (await getJobView(this.db, uuid, owner))!;
      }
      return await this.view(row);
    } finally {
      finished?.close();
    }
  }

  /**
   * The job as it is now (status without a long poll): without a promise when the store reads
   * synchronously and the job needs no queue position (SQLite, the hot path). Such a job may be
   * one kept from an earlier read (store/unchanged-reads.ts): frozen, shared, never to be changed.
   */
  statusNow(owner: string, uuid: string): ApiJob | Promise<ApiJob> {
    // uuid has a fixed length (a checked UUID): with the owner after it, the key names both.
    const reads = (this.statusReads ??= statusReadsOf(this.db) ?? null);
    const got = reads ? reads.get(uuid + owner, uuid, owner) : null;
    if (got === null) return this.status(owner, uuid);
    if (!got) throw notFound(JOB_NOT_FOUND);
    return isKeptJob(got) ? got : this.view(got);
  }

  /**
   * The public job; a queued job's detail tells its place in the queue (claim order), exact up
   * to POSITION_CAP jobs ahead, so a status read costs the same at any backlog.
   */
  private view(row: JobView): ApiJob | Promise<ApiJob> {
    return row.status === 'queued' ? this.queuedView(row) : toApiJob(row);
  }

  private async queuedView(row: JobView): Promise<ApiJob> {
    const job = toApiJob(row);
    const ahead = await jobsAhead(this.db, row, POSITION_CAP);
    job.status_detail =
      ahead < POSITION_CAP
        ? `${row.status_detail} (position ${ahead + 1} in the queue)`
        : `${row.status_detail} (more than ${POSITION_CAP.toLocaleString('en-US')} jobs ahead in the queue)`;
    return job;
  }

  async list(owner: string, q: { status?: JobStatus; jobType?: string; limit: number; cursor?: string }) {
    let before: { createdAt: number; uuid: string } | undefined;
    if (q.cursor !== undefined) {
      const m = /^(\d{1,16}):([0-9a-f-]{36})$/.exec(Buffer.from(q.cursor, 'base64url').toString());
      if (!m) throw invalid('cursor: not a cursor returned by this endpoint');
      before = { createdAt: Number(m[1]), uuid: m[2]! };
    }
    const rows = await listJobs(this.db, { owner, status: q.status, jobType: q.jobType, limit: q.limit + 1, before });
    const page = rows.slice(0, q.limit);
    const last = page[page.length - 1];
    return {
      jobs: page.map(toApiJob),
      next_cursor:
        rows.length > q.limit && last ? Buffer.from(`${last.created_at}:${last.uuid}`).toString('base64url') : null,
    };
  }

  async cancel(owner: string, uuid: string): Promise<ApiJob> {
    const row = await this.deps.lifecycle.cancel(owner, uuid);
    if (!row) {
      const current = await getJobView(this.db, uuid, owner);
      if (!current) throw notFound(JOB_NOT_FOUND);
      throw conflict(`job is already ${current.status}; only queued or processing jobs can be cancelled`);
    }
    return toApiJob(row);
  }

  /**
   * DELETE /jobs/{uuid}: purges a finished job's data (jobs/purge.ts) and answers the tombstone;
   * a repeat answers the same. An active job is a 409 (cancel it first). When the result store
   * fails half-way the job's data is already erased and its result refused; housekeeping finishes
   * the purge, and this answers 503 so the client may retry.
   */
  async delete(owner: string, uuid: string): Promise<ApiJob> {
    const row = await getJobView(this.db, uuid, owner);
    if (!row) throw notFound(JOB_NOT_FOUND);
    if (!isTerminalStatus(row.status)) {
      throw conflict(`job is ${row.status}; cancel it first (POST /api/v1/jobs/${uuid}/cancel), then delete it`);
    }
    if (row.data_removed_at === null) {
      try {
        await purgeJob(this.deps, uuid, owner);
      } catch (err) {
        if (err instanceof DomainError) throw err;
        throw new DomainError(
          'unavailable',
          "the result store is unavailable: the job's data is erased and its result will be deleted shortly; retry to confirm",
        );
      }
    }
    return this.view((await getJobView(this.db, uuid, owner))!);
  }

  async result(owner: string, uuid: string): Promise<ResultLink> {
    const row = await getJobView(this.db, uuid, owner);
    if (!row) throw notFound(JOB_NOT_FOUND);
    if (row.data_removed_at !== null) throw gone(DATA_REMOVED);
    if (row.status !== 'completed' || !row.result_key) {
      throw conflict(
        isTerminalStatus(row.status)
          ? `job is ${row.status}; it has no result`
          : `result is not ready: job is ${row.status}`,
      );
    }
    if (row.result_deleted_at !== null) {
      throw gone(DATA_REMOVED);
    }
    const expiresAt = this.deps.clock.now() + this.deps.config.resultUrlTtlMs;
    return {
      uuid: row.uuid,
      url: await this.deps.results.signedUrl(row.result_key, expiresAt),
      expires_at: new Date(Math.floor(expiresAt / 1000) * 1000).toISOString(),
      content_type: row.result_content_type ?? 'application/octet-stream',
      size_bytes: row.result_size ?? 0,
    };
  }
}

/** On SQLite, the status reads with their memory: the public job, or a queued job's row (its position is read apart). */
function statusReadsOf(db: Kysely<Database>): UnchangedReads<ApiJob | JobView> | undefined {
  const read = jobViewReader(db);
  const conn = sqliteHandle(db);
  if (!read || !conn) return undefined;
  return new UnchangedReads<ApiJob | JobView>(
    conn,
    (uuid, owner) => {
      const row = read(uuid, owner);
      return row && (row.status === 'queued' ? row : Object.freeze(toApiJob(row)));
    },
    isKeptJob,
  );
}

/** A job kept by the status reads (frozen: shared by every answer until the database changes). */
export const isKeptJob = (v: ApiJob | JobView): v is ApiJob => Object.isFrozen(v);
