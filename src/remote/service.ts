import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import { conflict, DomainError, invalid } from '../errors.js';
import { formatDuration } from '../media/net-errors.js';
import { createGuardedAgent, type IsPublic, type LookupAll } from '../media/index.js';
import { type ErrorType } from '../contract/api.js';
import { heartbeatEveryMs } from '../contract/worker.js';
import { JobError } from '../errors.js';
import { toProgress } from '../jobs/progress.js';
import type { Held, JobLifecycle } from '../jobs/lifecycle.js';
import { attemptsLeft } from '../jobs/moves.js';
import type { Catalogue } from '../processors/catalogue.js';
import { SLOT_NAMES, type SlotName } from '../contract/api.js';
import { wakeOn, type Signals } from '../signals.js';
import { describeStorageError, isStorageFull, isStorageUnavailable } from '../storage/errors.js';
import type { ResultStore } from '../storage/types.js';
import { getJob, type JobRow } from '../store/jobs.js';
import {
  blobsOfJob,
  deleteStagedBlob,
  insertStagedBlob,
  outputsOf,
  staleBlobs,
  type BlobOwner,
} from '../store/staged-blobs.js';
import type { Database } from '../store/schema.js';
import { fetchInputs } from '../worker/inputs.js';
import type { Wakeable } from '../runtime/wake.js';
import { extensionOf } from '../media/extensions.js';
import type { OutputType } from './output-type.js';
import type { ClaimedJob } from '../contract/worker.js';

export interface RemoteWorkDeps {
  db: Kysely<Database>;
  lifecycle: JobLifecycle;
  catalogue: Catalogue;
  config: Config;
  clock: Clock;
  results: ResultStore;
  signals: Signals;
  log: Logger;
  lookup?: LookupAll;
  isPublic?: IsPublic;
}

/**
 * A remote attempt's lease token: `r.<random>.<claimed at>`. The random part makes it unguessable
 * (it is the attempt's only credential); the claim time rides along so heartbeats can enforce the
 * timeout without a read, and it cannot be altered since the whole token must match the job's
 * lease_owner column.
 */
function newLease(now: number): string {
  return `r.${randomBytes(18).toString('base64url')}.${now}`;
}

function claimedAtOf(lease: string): number | undefined {
  const m = /^r\.[A-Za-z0-9_-]{24}\.(\d{1,15})$/.exec(lease);
  return m ? Number(m[1]) : undefined;
}

const NOT_HELD =
  'the lease is no longer held (it expired and the job was claimed again, or the job was cancelled or has ended): drop the job';

/**
 * The service side of the remote worker protocol (docs/workers.md): claims with staged inputs,
 * heartbeats, outputs, completion and failure, all through the one JobLifecycle, so a remote
 * attempt obeys the very lease, cancel, timeout, result and webhook rules of a built-in one.
 */
export class RemoteWork {
  private readonly dispatcher: Dispatcher;
  /** The long polls waiting for a job right now (stop ends them). */
  private readonly waits = new Set<Wakeable>();
  private closing = false;

  constructor(private readonly deps: RemoteWorkDeps) {
    this.dispatcher = createGuardedAgent({
      allowPrivate: deps.config.mediaAllowPrivateNetworks,
      lookup: deps.lookup,
      isPublic: deps.isPublic,
    });
  }

  /** Nothing runs in the background here (housekeeping recovers leases and sweeps staged blobs). */
  start(): void {
    this.closing = false;
  }

  /** Claims (long polls) waiting for a job right now. */
  get waitingClaims(): number {
    return this.waits.size;
  }

  /** Ends every waiting long poll with no job (the server is closing: in-flight requests must finish). */
  stopWaiting(): void {
    this.closing = true;
    for (const w of this.waits) w.wake();
  }

  async stop(): Promise<void> {
    this.stopWaiting();
    await this.dispatcher.close();
  }

  /** Names of the job types remote workers serve (declared in JOB_TYPES_FILE). */
  remoteTypes(): string[] {
    return this.deps.catalogue
      .list()
      .filter((t) => t.remote)
      .map((t) => t.name);
  }

  /**
   * Claims the next job of `jobTypes` in fair order, staging its inputs; waits up to `waitMs` for
   * one to be queued. A job whose media cannot be fetched fails here and the claim goes on.
   */
  async claim(jobTypes: string[], waitMs: number, signal: AbortSignal): Promise<ClaimedJob | null> {
    // Listen before claiming, so a submit between an empty claim and the wait is not missed.
    const queued = wakeOn(this.deps.signals, 'job-queued');
    this.waits.add(queued);
    try {
      const deadline = performance.now() + waitMs;
      for (;;) {
        const job = await this.claimOne(jobTypes, signal);
        if (job !== 'empty') {
          if (job) return job;
          continue; // the claimed job failed at staging: take the next one
        }
        const left = deadline - performance.now();
        if (left <= 0 || signal.aborted || this.closing) return null;
        await queued.wait(Math.min(left, this.deps.config.queuePollIntervalMs), signal);
      }
    } finally {
      queued.close();
      this.waits.delete(queued);
    }
  }

  private async claimOne(jobTypes: string[], signal: AbortSignal): Promise<ClaimedJob | null | 'empty'> {
    const { lifecycle, clock, log } = this.deps;
    const now = clock.now();
    const [row] = await lifecycle.claim({ leaseOwner: newLease(now), jobTypes, limit: 1 });
    if (!row) return 'empty';
    const held: Held = { uuid: row.uuid, lease: row.lease_owner!, job_type: row.job_type, startedAt: now };
    const input = JSON.parse(row.input) as Record<string, unknown>;
    // Staging a large video may outlast the lease: keep it alive meanwhile, as a worker would.
    const keepAlive = setInterval(() => {
      lifecycle.renew(held, 'staging media').catch(() => {});
    }, heartbeatEveryMs(this.deps.config.jobLeaseMs));
    try {
      const staged = await this.stage(row, input, signal);
      clearInterval(keepAlive);
      if (signal.aborted) throw new Error('claim abandoned by the worker');
      // Still ours after staging (not cancelled meanwhile)? Then hand it over with a fresh lease.
      // Nothing staged: the claim's own lease is fresh, no second statement.
      if (Object.keys(staged).length > 0 && (await lifecycle.renew(held, 'starting')) === undefined) {
        await this.sweepJob(row.uuid);
        return null;
      }
      return {
        uuid: row.uuid,
        job_type: row.job_type,
        model: row.model,
        attempt: row.attempts,
        input: { ...input, ...staged },
        lease_token: row.lease_owner!,
        lease_expires_at: new Date(clock.now() + this.deps.config.jobLeaseMs).toISOString(),
        timeout_at: new Date(now + this.timeoutOf(row.job_type)).toISOString(),
      };
    } catch (err) {
      clearInterval(keepAlive);
      if (err instanceof JobError) {
        await lifecycle.fail(held, { errorType: err.errorType, message: err.message });
        log.info(
          { job_uuid: row.uuid, error_type: err.errorType, error_message: err.message },
          'remote job failed while staging its media',
        );
      } else {
        // The worker went away or something broke on our side: the job goes back, uncounted.
        await lifecycle.handBack(held);
        if (!signal.aborted) log.error({ err, job_uuid: row.uuid }, 'staging a remote job failed');
      }
      await this.sweepJob(row.uuid);
      if (err instanceof JobError) return null;
      if (signal.aborted) return 'empty';
      throw err;
    }
  }

  /** Fetches the client's media under the URL policy and stores signed, expiring copies. */
  private async stage(
    row: JobRow,
    input: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<Partial<Record<SlotName, string[]>>> {
    const { catalogue, config, clock, results, db } = this.deps;
    const type = catalogue.get(row.job_type)!;
    const media = await fetchInputs(type, input, {
      config,
      signal,
      dispatcher: this.dispatcher,
      lookup: this.deps.lookup,
      isPublic: this.deps.isPublic,
    });
    const expires = clock.now() + config.remote.mediaUrlTtlMs;
    // A tag per staging: a handed-back attempt keeps its number, and must not share keys with the next.
    const tag = randomBytes(4).toString('hex');
    const out: Partial<Record<SlotName, string[]>> = {};
    for (const slot of SLOT_NAMES) {
      const files = media[slot];
      if (!files) continue;
      out[slot] = await Promise.all(
        files.map(async (m, i) => {
          const key = `${row.uuid}.${row.attempts}.in-${slot}-${i}-${tag}.${extensionOf(m.mime)}`;
          // The row first: a crash between the two leaves a row for the sweep, never a stray blob.
          await insertStagedBlob(db, {
            key,
            job_uuid: row.uuid,
            lease_owner: row.lease_owner!,
            kind: 'input',
            content_type: m.mime ?? 'application/octet-stream',
            size: m.bytes.length,
            created_at: clock.now(),
          });
          await results.put(key, m.bytes, m.mime ?? 'application/octet-stream');
          return results.signedUrl(key, expires);
        }),
      );
    }
    return out;
  }

  private timeoutOf(jobType: string): number {
    return this.deps.catalogue.get(jobType)?.remote?.timeoutMs ?? this.deps.config.jobTimeoutMs;
  }

  /**
   * Renews the lease and shows the worker's detail. `cancelRequested` when the client cancelled
   * the job or it ran past its timeout (then failed here, as a built-in job would be).
   */
  async heartbeat(
    uuid: string,
    lease: string,
    detail?: string,
    progress?: number | { stage: string; percent?: number | null; current?: number; total?: number },
  ): Promise<{ leaseExpiresAt: number; cancelRequested: boolean }> {
    const { lifecycle, clock, config } = this.deps;
    const claimedAt = claimedAtOf(lease);
    if (claimedAt === undefined) throw conflict(NOT_HELD);
    const held: Held = { uuid, lease, job_type: '', startedAt: claimedAt };
    // A number is an older worker's fraction of its detail; an object is the contract's progress;
    // a detail alone is a stage without a measure.
    const report =
      typeof progress === 'number'
        ? toProgress(detail ?? 'processing', { percent: progress * 100 })
        : progress !== undefined
          ? toProgress(progress.stage, progress)
          : detail !== undefined
            ? toProgress(detail)
            : undefined;
    const shown =
      report && (detail === undefined || typeof progress === 'number' || detail === report.progress.stage)
        ? report.detail
        : detail;
    const jobType = await lifecycle.renew(held, shown, report?.progress);
    const now = clock.now();
    if (jobType === undefined) {
      // Not ours any more: a cancelled job tells its worker to stop; anything else is a 409.
      const row = await getJob(this.deps.db, uuid);
      if (row?.status !== 'cancelled') throw conflict(NOT_HELD);
      await this.sweepJob(uuid);
      return { leaseExpiresAt: now, cancelRequested: true };
    }
    const timeoutMs = this.timeoutOf(jobType);
    if (now - claimedAt > timeoutMs) {
      await lifecycle.fail(held, {
        errorType: 'timeout',
        message: `job ran longer than the ${formatDuration(timeoutMs)} limit`,
        detail: 'timed out',
      });
      await this.sweepJob(uuid);
      return { leaseExpiresAt: now, cancelRequested: true };
    }
    return { leaseExpiresAt: now + config.jobLeaseMs, cancelRequested: false };
  }

  /** The attempt's job row, if this lease holds it (409 otherwise). */
  private async held(uuid: string, lease: string): Promise<{ row: JobRow; held: Held }> {
    const claimedAt = claimedAtOf(lease);
    const row = claimedAt === undefined ? undefined : await getJob(this.deps.db, uuid);
    if (!row || row.status !== 'processing' || row.lease_owner !== lease) throw conflict(NOT_HELD);
    return { row, held: { uuid, lease, job_type: row.job_type, startedAt: claimedAt! } };
  }

  /** Stores the attempt's output (replacing an earlier upload of the same attempt). */
  async putOutput(
    uuid: string,
    lease: string,
    bytes: Buffer,
    type: OutputType,
  ): Promise<{ contentType: string; size: number }> {
    const { db, results, clock } = this.deps;
    const { row } = await this.held(uuid, lease);
    const key = `${uuid}.${row.attempts}.${type.extension}`;
    for (const old of await outputsOf(db, uuid, lease)) {
      await deleteStagedBlob(db, old.key);
      if (old.key !== key) await results.delete(old.key);
    }
    // A handed-back attempt had the same number: its row (if not swept yet) no longer owns the key.
    await deleteStagedBlob(db, key);
    await insertStagedBlob(db, {
      key,
      job_uuid: uuid,
      lease_owner: lease,
      kind: 'output',
      content_type: type.contentType,
      size: bytes.length,
      created_at: clock.now(),
    });
    try {
      await results.put(key, bytes, type.contentType);
    } catch (err) {
      // The worker keeps its lease and may upload again: a 503 with the reason, not a 500.
      if (isStorageUnavailable(err) || isStorageFull(err))
        throw new DomainError('unavailable', `${describeStorageError(err)}; retry later`);
      throw err;
    }
    return { contentType: type.contentType, size: bytes.length };
  }

  /** processing → completed with the uploaded output as the result. */
  async complete(uuid: string, lease: string): Promise<void> {
    const { lifecycle, clock } = this.deps;
    const { held } = await this.held(uuid, lease);
    const [out] = await outputsOf(this.deps.db, uuid, lease);
    if (!out) throw invalid(`upload the output first: PUT /api/v1/worker/jobs/${uuid}/output`);
    const timeoutMs = this.timeoutOf(held.job_type);
    if (clock.now() - held.startedAt! > timeoutMs) {
      await lifecycle.fail(held, {
        errorType: 'timeout',
        message: `job ran longer than the ${formatDuration(timeoutMs)} limit`,
        detail: 'timed out',
      });
      await this.sweepJob(uuid);
      throw conflict(`the job ran past its ${formatDuration(timeoutMs)} timeout and has failed`);
    }
    const done = await lifecycle.complete(held, {
      key: out.key,
      contentType: out.content_type,
      size: out.size,
    });
    await this.sweepJob(uuid);
    if (!done) throw conflict(NOT_HELD);
  }

  /**
   * processing → failed; or back to the queue when the worker says another attempt may succeed and
   * attempts are left (JOB_MAX_ATTEMPTS). Answers the job's new status.
   */
  async fail(
    uuid: string,
    lease: string,
    errorType: ErrorType,
    message: string,
    retryable: boolean,
  ): Promise<'failed' | 'queued'> {
    const { lifecycle, config } = this.deps;
    const { row, held } = await this.held(uuid, lease);
    const again = retryable && attemptsLeft(row, config.jobMaxAttempts);
    const done = again
      ? await lifecycle.retry(held, row.attempts, message)
      : await lifecycle.fail(held, { errorType, message });
    await this.sweepJob(uuid);
    if (!done) throw conflict(NOT_HELD);
    return again ? 'queued' : 'failed';
  }

  /** processing → queued, the attempt not counted (a worker stopping hands its job back). */
  async release(uuid: string, lease: string): Promise<void> {
    const { held } = await this.held(uuid, lease);
    const done = await this.deps.lifecycle.handBack(held, 'handed back by a stopping worker');
    await this.sweepJob(uuid);
    if (!done) throw conflict(NOT_HELD);
  }

  /** Deletes the staged blobs of one job's ended attempts (the result blob stays). */
  async sweepJob(uuid: string): Promise<void> {
    await this.removeStale(await blobsOfJob(this.deps.db, uuid));
  }

  /** Deletes staged blobs of every ended attempt; its cost is the number of staged blobs, never the jobs. */
  async sweep(): Promise<number> {
    return this.removeStale(await staleBlobs(this.deps.db, 1000));
  }

  private async removeStale(rows: BlobOwner[]): Promise<number> {
    const { db, results } = this.deps;
    let removed = 0;
    for (const r of rows) {
      if (r.status === 'processing' && r.lease_owner === r.blob_lease) continue; // the attempt is alive
      if (r.key !== r.result_key) await results.delete(r.key);
      await deleteStagedBlob(db, r.key);
      removed++;
    }
    return removed;
  }
}
