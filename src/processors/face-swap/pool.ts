/**
 * The worker-thread pool shared by the face job types (image-face-swap, face-detect): each thread
 * loads the face models once and keeps them. One job is one task; its stages become the job's
 * progress and its AbortSignal cancels it cooperatively.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { MessageChannel } from 'node:worker_threads';
import { JobError } from '../../errors.js';
import type { ProcessorResult, RunContext } from '../types.js';
import type { DetectJobInput, SwapJobInput } from './pipeline.js';
import { lazyThreadPool, workerBeside } from '../thread-pool.js';
import { CONTROL_CANCELLED, STAGES_DONE, type WorkerReply, type WorkerTask } from './worker.js';

/** The worker-thread pool of the face job types (one per process: each thread holds the models). */
export type FaceThreadPool = ReturnType<typeof createFaceThreadPool>;

/** `threads` worker threads running worker.ts, started on first use. */
export function createFaceThreadPool(threads = 1) {
  return lazyThreadPool<WorkerTask, WorkerReply>(workerBeside(import.meta.url), Math.max(1, Math.floor(threads)), {
    kind: 'warmup',
  });
}

export type JobTask = { kind: 'swap'; input: SwapJobInput } | { kind: 'detect'; input: DetectJobInput };

/**
 * Runs one job's task on the pool: stage messages become the job's progress, and the job's
 * AbortSignal cancels it cooperatively. Piscina's own `signal` would instead terminate the thread,
 * which loses the loaded models and can crash the process if sharp is mid-operation in that thread:
 * the worker sees the flag between stages (≤ ~0.5 s) and stops, and this promise settles at once.
 */
export async function runOnPool(
  pool: FaceThreadPool,
  ctx: RunContext<unknown>,
  job: JobTask,
  buffers: ArrayBuffer[],
): Promise<ProcessorResult> {
  const control = new Int32Array(new SharedArrayBuffer(4));
  const { port1, port2 } = new MessageChannel();
  let stagesDone!: () => void;
  const allStages = new Promise<void>((resolve) => (stagesDone = resolve));
  port1.on('message', (msg: unknown) => {
    if (msg === STAGES_DONE) stagesDone();
    else if (typeof msg === 'string' && !ctx.signal.aborted) ctx.progress(msg);
  });
  const task = pool.get().run(
    { ...job, port: port2, control },
    {
      transferList: [port2, ...buffers] as ArrayBuffer[],
    },
  );
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => {
      Atomics.store(control, 0, CONTROL_CANCELLED);
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the signal's own reason (an Error) is what the worker inspects
      reject(ctx.signal.reason ?? new Error('aborted'));
    };
    ctx.signal.addEventListener('abort', onAbort, { once: true });
  });
  task.catch(() => {}); // if the abort wins the race, a late failure must not go unhandled
  aborted.catch(() => {});
  let reply: WorkerReply;
  try {
    reply = await Promise.race([task, aborted]);
    // The reply and the stage messages travel on different ports, so the reply can overtake the
    // last stages. The worker ends the stages with a marker on the stage port itself (in order).
    await Promise.race([allStages, sleep(1000, undefined, { ref: false })]);
  } finally {
    if (onAbort) ctx.signal.removeEventListener('abort', onAbort);
    port1.close();
  }
  switch (reply.kind) {
    case 'ok':
      return {
        bytes: Buffer.from(reply.bytes.buffer, reply.bytes.byteOffset, reply.bytes.byteLength),
        contentType: reply.contentType,
        extension: reply.extension,
      };
    case 'job-error':
      throw new JobError(reply.errorType, reply.message);
    case 'cancelled':
      throw ctx.signal.reason ?? new Error('aborted');
    default:
      throw new Error(`unexpected worker reply ${reply.kind}`);
  }
}
