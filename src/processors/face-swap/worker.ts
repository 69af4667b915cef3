/**
 * Piscina worker entry: one instance per thread, so the face models load once per thread and stay
 * loaded. Everything crossing the thread boundary is plain data; a JobError is sent back as data
 * because structured cloning would turn it into a plain Error.
 */
import type { MessagePort } from 'node:worker_threads';
import { type ErrorType } from '../../contract/api.js';
import { JobError } from '../../errors.js';
import { runFaceDetect, runFaceSwap, type DetectJobInput, type SwapJobInput } from './pipeline.js';
import { warmUp } from './warmup.js';

/** Values of the shared control word (Int32Array over a SharedArrayBuffer, index 0). */
export const CONTROL_PENDING = 0;
export const CONTROL_RUNNING = 1;
export const CONTROL_CANCELLED = 2;

/** Last message on the stage port: every stage message was sent before it. */
export const STAGES_DONE = '\u0000done';

export type WorkerTask =
  | { kind: 'warmup' }
  | (({ kind: 'swap'; input: SwapJobInput } | { kind: 'detect'; input: DetectJobInput }) & {
      /** Receives stage names (strings) for the job's status_detail, then STAGES_DONE. */
      port: MessagePort;
      /** Set to CONTROL_CANCELLED by the main thread when the job's AbortSignal fires. */
      control: Int32Array;
    });

export type WorkerReply =
  | { kind: 'ready' }
  | { kind: 'ok'; bytes: Uint8Array; contentType: string; extension: string; facesSwapped: number }
  | { kind: 'job-error'; errorType: ErrorType; message: string }
  | { kind: 'cancelled' };

class Cancelled extends Error {}

export default async function handle(task: WorkerTask): Promise<WorkerReply> {
  if (task.kind === 'warmup') {
    await warmUp();
    return { kind: 'ready' };
  }
  const { port, control } = task;
  try {
    // A job cancelled while it waited in the queue is dropped here without any work.
    if (Atomics.compareExchange(control, 0, CONTROL_PENDING, CONTROL_RUNNING) !== CONTROL_PENDING) {
      return { kind: 'cancelled' };
    }
    // Models load on first use (detect.ts), so a bad input fails before paying for them.
    const hooks = {
      progress: (stage: string) => port.postMessage(stage),
      checkAborted: () => {
        if (Atomics.load(control, 0) === CONTROL_CANCELLED) throw new Cancelled();
      },
    };
    if (task.kind === 'detect') {
      const bytes = Buffer.from(JSON.stringify(await runFaceDetect(task.input, hooks)));
      return { kind: 'ok', bytes, contentType: 'application/json', extension: 'json', facesSwapped: 0 };
    }
    const out = await runFaceSwap(task.input, hooks);
    return { kind: 'ok', ...out };
  } catch (err) {
    if (err instanceof Cancelled) return { kind: 'cancelled' };
    if (err instanceof JobError) return { kind: 'job-error', errorType: err.errorType, message: err.message };
    throw err;
  } finally {
    port.postMessage(STAGES_DONE);
    port.close();
  }
}
