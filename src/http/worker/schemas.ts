import { z } from 'zod';
import { ERROR_TYPES } from '../../contract/api.js';
import type { ClaimedJob } from '../../contract/worker.js';
import { jobUuid, okEnvelope, responses, uuidParam, type ErrorStatus } from '../schemas.js';

/**
 * The remote worker protocol's request and answer schemas (the contract's shapes in zod: they
 * validate the calls and render the OpenAPI document), and what every worker operation shares.
 */

/** The longest long poll of a claim, in seconds. */
export const MAX_WAIT_S = 30;

/** Each worker operation's names and prose: the token scheme and the tag are the same for all. */
export const operation = (operationId: string, summary: string, description: string) => ({
  operationId,
  summary,
  tags: ['Remote workers'],
  security: [{ workerToken: [] }],
  description,
});

/** A route's responses: its 200 answer (the envelope of `data`) and the errors it can give. */
export const answers = (description: string, data: z.ZodType, ...errors: ErrorStatus[]) =>
  responses({ 200: { description, schema: okEnvelope(data) } }, ...errors);

/** What a call about a claimed job can answer besides its 200 (the lease lost or unknown: 409, 404). */
export const LEASE_ERRORS: ErrorStatus[] = [400, 401, 404, 409, 500, 503];
/** An upload can also be too large (413) or of no recognised type (415). */
export const OUTPUT_ERRORS: ErrorStatus[] = [400, 401, 404, 409, 413, 415, 500, 503];

export const leaseBody = z.strictObject({
  lease_token: z.string().min(1).max(200).describe("The claim's `lease_token`."),
});
export const jobParams = z.object({ uuid: uuidParam('The claimed job.') });
export const uuidOf = (request: { params: z.output<typeof jobParams> }) => jobUuid(request.params.uuid);

export const claimBody = z
  .strictObject({
    job_types: z
      .array(z.string().min(1).max(100))
      .min(1)
      .max(50)
      .optional()
      .describe('Default: every remote type the token may claim.'),
    wait: z.number().min(0).max(MAX_WAIT_S).default(0).describe('Seconds to wait for a job (long poll), 0 to 30.'),
  })
  .default({ wait: 0 });

export const claimedJobSchema = z
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

export const heartbeatBody = leaseBody.extend({
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
});

export const failBody = leaseBody.extend({
  error_type: z.enum(ERROR_TYPES),
  error_message: z.string().min(1).max(1000).describe('Shown to the client.'),
  retryable: z.boolean().default(false),
});
