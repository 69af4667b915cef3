import { EVENT_TYPES, type EventType } from '../../contract/webhook.js';
import { formatDuration } from '../../media/net-errors.js';
import { exampleJob, WEBHOOK_JOBS } from './examples.js';
import { pascal, ref, type Json } from './json.js';

/**
 * The document's `webhooks`: one operation per event type, what the service sends to a job's
 * `webhook.url` (the schedule and timeout are the configured ones).
 */

/** The configured delivery schedule and timeout (WEBHOOK_RETRY_SCHEDULE, WEBHOOK_TIMEOUT). */
export interface WebhookTiming {
  webhookRetryScheduleMs: readonly number[];
  webhookTimeoutMs: number;
}

/** "at once, then 1m, 5m, 30m and 6h after each failure", from the configured schedule. */
function scheduleText(scheduleMs: readonly number[]): string {
  const [first = 0, ...retries] = scheduleMs;
  const start = first === 0 ? 'at once' : `${formatDuration(first)} after the job ends`;
  if (retries.length === 0) return `${start}, once`;
  const list = retries.map(formatDuration);
  const last = list.pop()!;
  return `${start}, then ${list.length > 0 ? `${list.join(', ')} and ${last}` : last} after each failure`;
}

/** The headers of every delivery: its id, timestamp and signature. */
const deliveryHeaders = () => [
  {
    name: 'X-Service-Event-Id',
    in: 'header',
    required: true,
    description: 'The event id (same as `event_id`; the same on every attempt).',
    schema: { type: 'string', format: 'uuid' },
  },
  {
    name: 'X-Service-Timestamp',
    in: 'header',
    required: true,
    description: 'Unix seconds, fresh for each attempt; part of the signed message.',
    schema: { type: 'string', pattern: '^[0-9]+$' },
  },
  {
    name: 'X-Service-Signature',
    in: 'header',
    required: false,
    description: 'Only when the webhook has a secret: lowercase hex HMAC-SHA256(secret, timestamp + "." + rawBody).',
    schema: { type: 'string', pattern: '^[0-9a-f]{64}$' },
  },
];

/** How a receiver is called and should answer, with the configured timing. */
function deliveryDescription(timing: WebhookTiming): string {
  return (
    'Sent only when a job reaches a terminal state, only for the events in `webhook.events` (all three when omitted). ' +
    `Attempts: ${scheduleText(timing.webhookRetryScheduleMs)}; any 2xx ends it. No redirects are followed; ${formatDuration(timing.webhookTimeoutMs)} timeout. ` +
    'Verify `X-Service-Signature` = lowercase hex HMAC-SHA256(secret, `X-Service-Timestamp` + "." + raw body) on the raw body before parsing it ' +
    "(`import { verifyWebhook } from 'media-jobs'`), acknowledge quickly, and deduplicate on `event_id`."
  );
}

/** The operation of one event type. */
function webhookOperation(event: EventType, description: string): Json {
  return {
    post: {
      operationId: `webhook${pascal(event)}`,
      tags: ['Webhooks'],
      summary: `${event}: sent to webhook.url`,
      description,
      parameters: deliveryHeaders(),
      requestBody: {
        required: true,
        content: {
          'application/json': {
            schema: ref('schemas', 'WebhookPayload'),
            example: {
              event_id: '5b0a6f0e-2a39-4f5e-9a52-8f1b8d1e2c3a',
              event_type: event,
              occurred_at: '2026-01-01T00:00:00.000Z',
              job: { uuid: exampleJob().uuid, ...WEBHOOK_JOBS[event] },
            },
          },
        },
      },
      security: [],
      responses: {
        '2XX': { description: 'Any 2xx acknowledges the delivery.' },
        default: { description: 'Anything else (or a timeout) is retried on the schedule.' },
      },
    },
  };
}

/** The document's `webhooks`, by event type. */
export function webhookOperations(timing: WebhookTiming): Json {
  const description = deliveryDescription(timing);
  return Object.fromEntries(EVENT_TYPES.map((event) => [event, webhookOperation(event, description)]));
}
