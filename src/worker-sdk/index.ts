/**
 * `media-jobs/worker`: serve declared job types from anywhere (docs/workers.md).
 *
 *   import { runWorker } from 'media-jobs/worker';
 *   const worker = runWorker({ url, token, jobTypes: ['upscale'], handle: async (job, ctx) => ({ bytes, contentType }) });
 *   process.on('SIGTERM', () => void worker.stop());
 *
 * It loads none of the service's code: a GPU box needs only this module and Node.
 */
export {
  runWorker,
  WorkerJobError,
  type JobContext,
  type JobOutput,
  type MediaSlot,
  type RemoteWorker,
  type RunWorkerOptions,
  type WorkerJob,
} from './run-worker.js';
export { WorkerClient, WorkerHttpError, type Claim } from './client.js';
// The package's entry points alone publish the contract's shapes (lint forbids re-exports elsewhere).
export { ERROR_TYPES, type ErrorType } from '../contract/api.js';
export type { ClaimedJob } from '../contract/worker.js';
