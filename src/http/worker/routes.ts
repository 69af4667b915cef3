import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Clock } from '../../clock.js';
import { ERROR_TYPES } from '../../contract/api.js';
import type {
  ClaimAnswer,
  ClaimedJob,
  CompleteAnswer,
  FailAnswer,
  HeartbeatAnswer,
  OutputAnswer,
  ReleaseAnswer,
} from '../../contract/worker.js';
import { outputType } from '../../remote/output-type.js';
import type { RemoteWork } from '../../remote/service.js';
import type { Store } from '../../store/store.js';
import {
  findActiveWorkerToken,
  touchWorkerToken,
  WORKER_TOKEN_PREFIX,
  type WorkerToken,
} from '../../store/worker-tokens.js';
import { ApiError } from '../api-error.js';
import { ok } from '../envelope.js';
import { jobUuid, okEnvelope, responses, uuidParam } from '../schemas.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The worker token that made a /api/v1/worker request (set by its auth hook). */
    workerToken: WorkerToken;
  }
}

export interface WorkerRouteDeps {
  store: Store;
  clock: Clock;
  remote: RemoteWork;
  maxOutputBytes: number;
}

const CHALLENGE = { 'www-authenticate': 'Bearer realm="media-jobs-worker"' };
const TOKEN_RE = new RegExp(`^Bearer +(${WORKER_TOKEN_PREFIX}[A-Za-z0-9_-]{1,100})\\s*$`, 'i');
/** last_seen_at is written at most this often per token and process: no write per heartbeat. */
const TOUCH_EVERY_MS = 10_000;
const MAX_WAIT_S = 30;
const security = [{ workerToken: [] }];
const tags = ['Remote workers'];

const leaseBody = z.strictObject({ lease_token: z.string().min(1).max(200).describe("The claim's `lease_token`.") });
const jobParams = z.object({ uuid: uuidParam('The claimed job.') });
const uuidOf = (request: { params: z.output<typeof jobParams> }) => jobUuid(request.params.uuid);
const claimedJobSchema = z
  .looseObject({
    uuid: z.uuid(),
    job_type: z.string(),
    model: z.string(),
    attempt: z
      .int()
      .min(1)
      .describe('1 for the first attempt; higher when an earlier worker stopped responding or failed retryably.'),
    input: z
      .record(z.string(), z.unknown())
      .describe("The client's input; each media slot is an array of signed, expiring URLs of staged copies."),
    lease_token: z.string().describe('Proves this attempt holds the job: send it with every call about the job.'),
    lease_expires_at: z.iso.datetime().describe('Heartbeat before this time or lose the job.'),
    timeout_at: z.iso.datetime().describe('The job fails with `timeout` if not completed by then.'),
  })
  .describe('A claimed job.') satisfies z.ZodType<ClaimedJob>;

/**
 * /api/v1/worker/…: the remote worker protocol (docs/workers.md), in its own scope with its own
 * auth hook (worker tokens only: API keys are refused here, and worker tokens everywhere else).
 */
export async function workerRoutes(scope: FastifyInstance, deps: WorkerRouteDeps): Promise<void> {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  const touched = new Map<string, number>();
  // Long polls would hold the server's close() open for up to 30 s: end them first.
  app.addHook('preClose', async () => deps.remote.stopWaiting());
  app.decorateRequest('workerToken', null as unknown as WorkerToken);
  app.addHook('onRequest', async (request: FastifyRequest) => {
    const header = request.headers.authorization;
    if (!header)
      throw new ApiError(
        401,
        'missing Authorization header: use "Authorization: Bearer mjw_…" (a worker token from media-jobs workers create-token)',
        CHALLENGE,
      );
    const m = TOKEN_RE.exec(header);
    if (!m)
      throw new ApiError(
        401,
        'a worker token is required here: "Authorization: Bearer mjw_…" (API keys are not accepted on worker routes)',
        CHALLENGE,
      );
    const token = await findActiveWorkerToken(deps.store.db, m[1]!);
    if (!token) throw new ApiError(401, 'invalid or revoked worker token', CHALLENGE);
    request.workerToken = token;
    const now = deps.clock.now();
    if (now - (touched.get(token.id) ?? 0) >= TOUCH_EVERY_MS) {
      touched.set(token.id, now);
      // Bookkeeping only: a failure here must not fail the worker's call.
      touchWorkerToken(deps.store.db, token.id, now).catch(() => touched.delete(token.id));
    }
  });

  app.post(
    '/claim',
    {
      schema: {
        operationId: 'workerClaim',
        tags,
        security,
        description:
          'Claims the next queued job of the given remote job types, with its media staged; long-polls up to `wait` seconds.',
        body: z
          .strictObject({
            job_types: z
              .array(z.string().min(1).max(100))
              .min(1)
              .max(50)
              .optional()
              .describe('Default: every remote type the token may claim.'),
            wait: z
              .number()
              .min(0)
              .max(MAX_WAIT_S)
              .default(0)
              .describe('Seconds to wait for a job (long poll), 0 to 30.'),
          })
          .default({ wait: 0 }),
        response: responses(
          {
            200: {
              description: 'A job, or null after the wait.',
              schema: okEnvelope(z.looseObject({ job: claimedJobSchema.nullable() })),
            },
          },
          400,
          401,
          403,
          500,
          503,
        ),
      },
    },
    async (request, reply) => {
      const body = request.body;
      const declared = deps.remote.remoteTypes();
      const allowed = request.workerToken.jobTypes ?? declared;
      const wanted = body.job_types ?? allowed;
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
      // A worker that hangs up mid-poll must not be handed a job it will never see.
      const gone = new AbortController();
      reply.raw.on('close', () => {
        if (!reply.raw.writableFinished) gone.abort();
      });
      const job = await deps.remote.claim([...new Set(wanted)], body.wait * 1000, gone.signal);
      // The worker hung up while the job was being claimed: hand it back now, uncounted, rather than
      // let it wait out a lease nobody holds.
      if (job && gone.signal.aborted) {
        await deps.remote.release(job.uuid, job.lease_token).catch(() => {});
        return ok<ClaimAnswer>({ job: null });
      }
      return ok<ClaimAnswer>({ job });
    },
  );

  app.post(
    '/jobs/:uuid/heartbeat',
    {
      schema: {
        operationId: 'workerHeartbeat',
        tags,
        security,
        description:
          'Renews the lease and shows `status_detail` in the public status. `cancel_requested` tells the worker to stop.',
        params: jobParams,
        body: leaseBody.extend({
          status_detail: z.string().max(200).optional().describe("Shown in the job's public status at once."),
          progress: z
            .union([
              z.number().min(0).max(1),
              z.strictObject({
                stage: z.string().min(1).max(200),
                percent: z.number().min(0).max(100).nullable().optional(),
                current: z.int().min(0).optional(),
                total: z.int().min(0).optional(),
              }),
            ])
            .optional()
            .describe(
              'Structured progress `{"stage","percent"}` (percent 0–100 or null, optional `current`/`total`), shown as the job\'s `progress`; a bare number is a fraction 0–1 of `status_detail` (older workers).',
            ),
        }),
        response: responses(
          {
            200: {
              description: 'The lease is renewed (or the job was cancelled).',
              schema: okEnvelope(z.looseObject({ lease_expires_at: z.iso.datetime(), cancel_requested: z.boolean() })),
            },
          },
          400,
          401,
          404,
          409,
          500,
          503,
        ),
      },
    },
    async (request) => {
      const uuid = uuidOf(request);
      const b = request.body;
      const r = await deps.remote.heartbeat(uuid, b.lease_token, b.status_detail, b.progress);
      return ok<HeartbeatAnswer>({
        lease_expires_at: new Date(r.leaseExpiresAt).toISOString(),
        cancel_requested: r.cancelRequested,
      });
    },
  );

  // Raw bytes of any type: its own scope, so no JSON parsing of a JSON result, and its own size limit.
  app.register(async (rawScope) => {
    const raw = rawScope.withTypeProvider<ZodTypeProvider>();
    raw.removeAllContentTypeParsers();
    raw.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: deps.maxOutputBytes }, (_req, body, done) =>
      done(null, body),
    );
    raw.put(
      '/jobs/:uuid/output',
      {
        bodyLimit: deps.maxOutputBytes,
        schema: {
          operationId: 'workerPutOutput',
          tags,
          security,
          description:
            'Uploads the result bytes of the attempt (the type is sniffed from the bytes); then call complete.',
          params: jobParams,
          querystring: leaseBody,
          response: responses(
            {
              200: {
                description: 'Stored.',
                schema: okEnvelope(z.looseObject({ content_type: z.string(), size: z.int() })),
              },
            },
            400,
            401,
            404,
            409,
            413,
            415,
            500,
            503,
          ),
        },
      },
      async (request) => {
        const uuid = uuidOf(request);
        const { lease_token } = request.query;
        const bytes = request.body;
        if (!Buffer.isBuffer(bytes) || bytes.length === 0)
          throw new ApiError(400, 'the output is empty: send the result bytes as the request body');
        const type = await outputType(bytes, request.headers['content-type']);
        if (!type)
          throw new ApiError(
            415,
            'output type not recognised: send an image, video or audio file, or valid application/json or text/plain',
          );
        const stored = await deps.remote.putOutput(uuid, lease_token, bytes, type);
        return ok<OutputAnswer>({ content_type: stored.contentType, size: stored.size });
      },
    );
  });

  app.post(
    '/jobs/:uuid/complete',
    {
      schema: {
        operationId: 'workerComplete',
        tags,
        security,
        description: 'Completes the job with the uploaded output as its result; the client gets its webhook.',
        params: jobParams,
        body: leaseBody,
        response: responses(
          { 200: { description: 'Completed.', schema: okEnvelope(z.looseObject({ status: z.literal('completed') })) } },
          400,
          401,
          404,
          409,
          500,
          503,
        ),
      },
    },
    async (request) => {
      const uuid = uuidOf(request);
      await deps.remote.complete(uuid, request.body.lease_token);
      return ok<CompleteAnswer>({ status: 'completed' });
    },
  );

  app.post(
    '/jobs/:uuid/fail',
    {
      schema: {
        operationId: 'workerFail',
        tags,
        security,
        description: 'Fails the job; with `retryable` it goes back to the queue while attempts are left.',
        params: jobParams,
        body: leaseBody.extend({
          error_type: z.enum(ERROR_TYPES),
          error_message: z.string().min(1).max(1000).describe('Shown to the client.'),
          retryable: z.boolean().default(false),
        }),
        response: responses(
          {
            200: {
              description: "The job's new status.",
              schema: okEnvelope(z.looseObject({ status: z.enum(['failed', 'queued']) })),
            },
          },
          400,
          401,
          404,
          409,
          500,
          503,
        ),
      },
    },
    async (request) => {
      const uuid = uuidOf(request);
      const b = request.body;
      const status = await deps.remote.fail(uuid, b.lease_token, b.error_type, b.error_message, b.retryable);
      return ok<FailAnswer>({ status });
    },
  );

  app.post(
    '/jobs/:uuid/release',
    {
      schema: {
        operationId: 'workerRelease',
        tags,
        security,
        description: 'Hands the job back to the queue untouched (a stopping worker); the attempt does not count.',
        params: jobParams,
        body: leaseBody,
        response: responses(
          {
            200: {
              description: 'Back in the queue.',
              schema: okEnvelope(z.looseObject({ status: z.literal('queued') })),
            },
          },
          400,
          401,
          404,
          409,
          500,
          503,
        ),
      },
    },
    async (request) => {
      const uuid = uuidOf(request);
      await deps.remote.release(uuid, request.body.lease_token);
      return ok<ReleaseAnswer>({ status: 'queued' });
    },
  );
}
