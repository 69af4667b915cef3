/**
 * `media-jobs/worker`: serve declared job types from anywhere (docs/workers.md).
 *
 *   import { runWorker } from 'media-jobs/worker';
 *   const worker = runWorker({ url, token, jobTypes: ['upscale'], handle: async (job, ctx) => ({ bytes, contentType }) });
 *   process.on('SIGTERM', () => worker.stop());
 */
export { runWorker, WorkerJobError, type JobContext, type JobOutput, type MediaSlot, type RemoteWorker, type RunWorkerOptions, type WorkerJob } from './run-worker.js';
export { WorkerClient, WorkerHttpError, type ClaimedJob } from './client.js';
