import { SLOT_NAMES, WAITING_FOR_WORKER } from '../../contract/api.js';
import { EVENT_TYPES, type EventType } from '../../contract/webhook.js';
import type { JobType } from '../../processors/types.js';
import type { Json } from './json.js';

/** The document's examples: valid bodies and answers, the same job throughout. */

/** An example answer in the success envelope. */
export const ok = (data: unknown) => ({ code: 0, message: 'ok', data });

export const exampleJob = (over: Json = {}) => ({
  uuid: '0b7e5a52-1c1f-4a8e-9f61-1f0a3c5d7e90',
  job_type: 'image-transform',
  model: 'lanczos3',
  status: 'queued',
  status_detail: WAITING_FOR_WORKER,
  error_type: null,
  error_message: null,
  result_ready: false,
  created_at: '2026-01-01T00:00:00.000Z',
  started_at: null,
  finished_at: null,
  deadline: null,
  priority: 0,
  progress: null,
  data_removed: false,
  retention: null,
  purge_at: null,
  ...over,
});

export const exampleLink = {
  uuid: exampleJob().uuid,
  url: 'https://media-jobs.example.com/results/0b7e5a52-1c1f-4a8e-9f61-1f0a3c5d7e90.webp?expires=1767229200&signature=5d41402abc4b2a76b9719d911017c592ae2f8f1b7cbb0d6e4e1f3a3c3b1e9f20',
  expires_at: '2026-01-01T01:00:00.000Z',
  content_type: 'image/webp',
  size_bytes: 48213,
};

/** A body that passes validation: first model, example URLs in the required slots, option defaults. */
export function exampleBody(t: JobType): Json {
  const input: Json = {};
  for (const s of SLOT_NAMES) {
    const spec = t.slots[s];
    if (!spec?.required) continue;
    const ext = spec.accepts === 'image' ? 'jpg' : spec.accepts === 'audio' ? 'mp3' : 'mp4';
    const url = `https://media.example.com/${s}.${ext}`;
    input[s] =
      spec.max > 1 && spec.min > 1
        ? Array.from({ length: spec.min }, (_, i) => url.replace(`.${ext}`, `-${i + 1}.${ext}`))
        : url;
  }
  return {
    job_type: t.name,
    model: t.models[0]?.name,
    input,
    webhook: { url: 'https://hooks.example.com/media-jobs', secret: 'a long random string', events: [...EVENT_TYPES] },
  };
}

/** The job of each webhook event's example payload (beside the example job's uuid). */
export const WEBHOOK_JOBS: Record<EventType, Json> = {
  'job.completed': {
    status: 'completed',
    status_detail: 'done',
    error_message: null,
    error_type: null,
    result_ready: true,
  },
  'job.failed': {
    status: 'failed',
    status_detail: 'failed',
    error_message: 'input.source: download failed: HTTP 404',
    error_type: 'media_fetch_failed',
    result_ready: false,
  },
  'job.cancelled': {
    status: 'cancelled',
    status_detail: 'cancelled by the client',
    error_message: null,
    error_type: null,
    result_ready: false,
  },
};
