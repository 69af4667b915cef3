import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Clock } from '../../clock.js';
import type {
  ClaimAnswer,
  CompleteAnswer,
  FailAnswer,
  HeartbeatAnswer,
  OutputAnswer,
  ReleaseAnswer,
} from '../../contract/worker.js';
import { outputType } from '../../remote/output-type.js';
import type { RemoteWork } from '../../remote/service.js';
import type { Store } from '../../store/store.js';
import type { WorkerToken } from '../../store/worker-tokens.js';
import { ApiError } from '../api-error.js';
import { ok } from '../envelope.js';
import { zodApp, type ZodApp } from '../zod-app.js';
import { workerAuth } from './auth.js';
import {
  answers,
  claimBody,
  claimedJobSchema,
  failBody,
  heartbeatBody,
  jobParams,
  LEASE_ERRORS,
  leaseBody,
  operation,
  OUTPUT_ERRORS,
  uuidOf,
} from './schemas.js';

export interface WorkerRouteDeps {
  store: Store;
  clock: Clock;
  remote: RemoteWork;
  maxOutputBytes: number;
}

/**
 * /api/v1/worker/…: the remote worker protocol (docs/workers.md), in its own scope with its own
 * auth hook (worker tokens only: API keys are refused here, and worker tokens everywhere else).
 */
export async function workerRoutes(scope: FastifyInstance, deps: WorkerRouteDeps): Promise<void> {
  const app = zodApp(scope);
  // Long polls would hold the server's close() open for up to 30 s: end them first.
  app.addHook('preClose', async () => deps.remote.stopWaiting());
  app.decorateRequest('workerToken', null as unknown as WorkerToken);
  app.addHook('onRequest', workerAuth(deps));
  claimRoute(app, deps.remote);
  heartbeatRoute(app, deps.remote);
  app.register(outputRoute, deps);
  completeRoute(app, deps.remote);
  failRoute(app, deps.remote);
  releaseRoute(app, deps.remote);
}

/** The job types a claim asks for: the body's, else every one the token may claim (400/403 otherwise). */
function claimableTypes(token: WorkerToken, declared: string[], asked: string[] | undefined): string[] {
  const allowed = token.jobTypes ?? declared;
  const wanted = asked ?? allowed;
  const unknown = wanted.filter((t) => !declared.includes(t));
  if (unknown.length > 0) {
    throw new ApiError(
      400,
      `not a remote job type: ${unknown.join(', ')} (declared in JOB_TYPES_FILE: ${declared.join(', ') || 'none'})`,
    );
  }
  const refused = wanted.filter((t) => !allowed.includes(t));
  if (refused.length > 0) throw new ApiError(403, `this worker token may not claim ${refused.join(', ')}`);
  if (wanted.length === 0)
    throw new ApiError(400, 'no job type to claim: this token may claim none of the declared remote types');
  return [...new Set(wanted)];
}

/** POST /claim: the next queued job of the asked types, with its media staged; long-polls up to `wait`. */
function claimRoute(app: ZodApp, remote: RemoteWork): void {
  const schema = {
    ...operation(
      'workerClaim',
      'Claim the next job',
      'Claims the next queued job of the given remote job types, with its media staged; long-polls up to `wait` seconds.',
    ),
    body: claimBody,
    response: answers(
      'A job, or null after the wait.',
      z.looseObject({ job: claimedJobSchema.nullable() }),
      400,
      401,
      403,
      500,
      503,
    ),
  };
  app.post('/claim', { schema }, async (request, reply) => {
    const types = claimableTypes(request.workerToken, remote.remoteTypes(), request.body.job_types);
    // A worker that hangs up mid-poll must not be handed a job it will never see.
    const gone = new AbortController();
    reply.raw.on('close', () => {
      if (!reply.raw.writableFinished) gone.abort();
    });
    const job = await remote.claim(types, request.body.wait * 1000, gone.signal);
    // The worker hung up while the job was being claimed: hand it back now, uncounted, rather than
    // let it wait out a lease nobody holds.
    if (job && gone.signal.aborted) {
      await remote.release(job.uuid, job.lease_token).catch(() => {});
      return ok<ClaimAnswer>({ job: null });
    }
    return ok<ClaimAnswer>({ job });
  });
}

/** POST /jobs/:uuid/heartbeat: renews the lease, shows progress; answers whether to stop. */
function heartbeatRoute(app: ZodApp, remote: RemoteWork): void {
  const schema = {
    ...operation(
      'workerHeartbeat',
      "Renew a job's lease and report progress",
      'Renews the lease and shows `status_detail` in the public status. `cancel_requested` tells the worker to stop.',
    ),
    params: jobParams,
    body: heartbeatBody,
    response: answers(
      'The lease is renewed (or the job was cancelled).',
      z.looseObject({ lease_expires_at: z.iso.datetime(), cancel_requested: z.boolean() }),
      ...LEASE_ERRORS,
    ),
  };
  app.post('/jobs/:uuid/heartbeat', { schema }, async (request) => {
    const b = request.body;
    const r = await remote.heartbeat(uuidOf(request), b.lease_token, b.status_detail, b.progress);
    return ok<HeartbeatAnswer>({
      lease_expires_at: new Date(r.leaseExpiresAt).toISOString(),
      cancel_requested: r.cancelRequested,
    });
  });
}

/**
 * PUT /jobs/:uuid/output: the result bytes, of any type. A plugin of its own (a scope), so no
 * JSON parsing of a JSON result, and its own size limit.
 */
async function outputRoute(scope: FastifyInstance, deps: WorkerRouteDeps): Promise<void> {
  const app = zodApp(scope);
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: deps.maxOutputBytes }, (_req, body, done) =>
    done(null, body),
  );
  const schema = {
    ...operation(
      'workerPutOutput',
      "Upload a job's output",
      'Uploads the result bytes of the attempt (the type is sniffed from the bytes); then call complete.',
    ),
    params: jobParams,
    querystring: leaseBody,
    response: answers('Stored.', z.looseObject({ content_type: z.string(), size: z.int() }), ...OUTPUT_ERRORS),
  };
  app.put('/jobs/:uuid/output', { bodyLimit: deps.maxOutputBytes, schema }, async (request) => {
    const bytes = request.body;
    if (!Buffer.isBuffer(bytes) || bytes.length === 0)
      throw new ApiError(400, 'the output is empty: send the result bytes as the request body');
    const type = await outputType(bytes, request.headers['content-type']);
    if (!type)
      throw new ApiError(
        415,
        'output type not recognised: send an image, video or audio file, or valid application/json or text/plain',
      );
    const stored = await deps.remote.putOutput(uuidOf(request), request.query.lease_token, bytes, type);
    return ok<OutputAnswer>({ content_type: stored.contentType, size: stored.size });
  });
}

/** POST /jobs/:uuid/complete: the uploaded output becomes the result. */
function completeRoute(app: ZodApp, remote: RemoteWork): void {
  const schema = {
    ...operation(
      'workerComplete',
      'Complete a job',
      'Completes the job with the uploaded output as its result; the client gets its webhook.',
    ),
    params: jobParams,
    body: leaseBody,
    response: answers('Completed.', z.looseObject({ status: z.literal('completed') }), ...LEASE_ERRORS),
  };
  app.post('/jobs/:uuid/complete', { schema }, async (request) => {
    await remote.complete(uuidOf(request), request.body.lease_token);
    return ok<CompleteAnswer>({ status: 'completed' });
  });
}

/** POST /jobs/:uuid/fail: failed, or queued again when retryable and attempts are left. */
function failRoute(app: ZodApp, remote: RemoteWork): void {
  const schema = {
    ...operation(
      'workerFail',
      'Fail a job',
      'Fails the job; with `retryable` it goes back to the queue while attempts are left.',
    ),
    params: jobParams,
    body: failBody,
    response: answers(
      "The job's new status.",
      z.looseObject({ status: z.enum(['failed', 'queued']) }),
      ...LEASE_ERRORS,
    ),
  };
  app.post('/jobs/:uuid/fail', { schema }, async (request) => {
    const b = request.body;
    const status = await remote.fail(uuidOf(request), b.lease_token, b.error_type, b.error_message, b.retryable);
    return ok<FailAnswer>({ status });
  });
}

/** POST /jobs/:uuid/release: back to the queue untouched (a stopping worker), uncounted. */
function releaseRoute(app: ZodApp, remote: RemoteWork): void {
  const schema = {
    ...operation(
      'workerRelease',
      'Hand a job back to the queue',
      'Hands the job back to the queue untouched (a stopping worker); the attempt does not count.',
    ),
    params: jobParams,
    body: leaseBody,
    response: answers('Back in the queue.', z.looseObject({ status: z.literal('queued') }), ...LEASE_ERRORS),
  };
  app.post('/jobs/:uuid/release', { schema }, async (request) => {
    await remote.release(uuidOf(request), request.body.lease_token);
    return ok<ReleaseAnswer>({ status: 'queued' });
  });
}
