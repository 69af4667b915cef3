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
export { ERROR_TYPES, WorkerClient, WorkerHttpError, type Claim, type ClaimedJob, type ErrorType } from './client.js';
