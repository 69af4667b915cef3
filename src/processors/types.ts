import type { z } from 'zod';
import type { SlotName, SlotSpec } from '../contract/api.js';

/** What processors get for each media item: downloaded and sniffed by media/fetch.ts. */
export type { FetchedMedia } from '../media/fetch.js';
import type { FetchedMedia } from '../media/fetch.js';

export interface RunContext<O> {
  model: string;
  options: O;
  /** Every slot the client filled, in the order given. */
  media: Partial<Record<SlotName, FetchedMedia[]>>;
  /** Aborted on cancel, on JOB_TIMEOUT and on shutdown: stop work promptly when it fires. */
  signal: AbortSignal;
  /**
   * Reports progress: `stage` (e.g. "detecting faces") becomes the job's structured `progress.stage`
   * and its `status_detail`; `at` adds a measure (frames done of all, or a percentage; the percent
   * is derived from current/total when not given). Cheap: call it per stage and per unit of work
   * (every frame); the worker writes at most one update per 500 ms (a new stage at once).
   */
  progress(stage: string, at?: ProgressAt): void;
}

/** How far a stage is: `current` of `total` units, and/or a percentage (0–100). */
export interface ProgressAt {
  percent?: number | null;
  current?: number;
  total?: number;
}

export interface ProcessorResult {
  bytes: Buffer;
  contentType: string;
  /** File extension without the dot, used in the result file name. */
  extension: string;
}

export interface ModelSpec {
  name: string;
  description: string;
}

/**
 * One entry of the job-type catalogue. This single declaration drives submit validation,
 * GET /job-types, the OpenAPI document and the README's job-type docs.
 */
export interface JobType<S extends z.ZodObject = z.ZodObject> {
  name: string;
  description: string;
  slots: Partial<Record<SlotName, SlotSpec>>;
  models: readonly ModelSpec[];
  /** Non-media fields of `input`. Must be a strict object so unknown keys are rejected. */
  options: S;
  run(ctx: RunContext<z.infer<S>>): Promise<ProcessorResult>;
  /**
   * Optional cross-field rule over the whole `input` (slots and options), checked at submit so a
   * contradictory request is a 400, not a failed job. Returns the offending field under `input`
   * and a message, or undefined when the input is fine.
   */
  checkInput?(input: Record<string, unknown>): { field: string; message: string } | undefined;
  /**
   * Set on job types declared in JOB_TYPES_FILE: remote workers serve them over /api/v1/worker
   * (`run` is never called) and `timeoutMs` overrides JOB_TIMEOUT for them.
   */
  remote?: { timeoutMs?: number | undefined };
  /**
   * For types whose stages have no units to count (one image): how much of the whole job is done
   * when each stage starts, in percent, by the stage names it reports (and the worker's
   * `downloading media`). A report without a measure then carries that percent.
   */
  stages?: Readonly<Record<string, number>>;
  /** Optional: the shape of a JSON result (`application/json`), for the OpenAPI document. */
  resultSchema?: z.ZodType;
  /**
   * Optional: start threads and load models before the first job, so that job does not pay for
   * them (a worker process calls it once at start, unless WORKER_WARMUP=false).
   */
  warmup?(): Promise<void>;
  /** Optional release of resources (worker threads) at shutdown. */
  close?(): Promise<void>;
}

/**
 * Whether a sniffed media type fits a slot's kind. Audio-only files in an mp4/m4a or webm container
 * sniff as video/mp4 or video/webm (the container, not the streams): an audio slot takes them and the
 * processor's own probe decides.
 */
export function mediaFits(accepts: SlotSpec['accepts'], mime: string | undefined): boolean {
  if (!mime) return false;
  if (mime.startsWith(`${accepts}/`)) return true;
  return accepts === 'audio' && (mime === 'video/mp4' || mime === 'video/webm' || mime === 'video/x-matroska');
}
