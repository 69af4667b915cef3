import { randomUUID } from 'node:crypto';
import { isTerminalStatus } from '../contract/api.js';
import type { NewWebhookEvent } from '../store/webhooks.js';
import { destinationOf, type WebhookPayload } from '../webhooks/events.js';
import { EVENT_TYPES, type EventType, type WebhookSettings } from '../contract/webhook.js';
import { isResultReady, type JobRow } from './view.js';

/**
 * The outbox row for a job that has just reached a terminal state, or null when the job has
 * no webhook or did not subscribe to this event. Called inside the transition's transaction.
 */
export function terminalEvent(job: JobRow, now: number, firstDelayMs = 0): NewWebhookEvent | null {
  if (!job.webhook || !isTerminalStatus(job.status)) return null;
  const settings = JSON.parse(job.webhook) as WebhookSettings;
  const eventType: EventType = `job.${job.status}`;
  if (!(settings.events ?? EVENT_TYPES).includes(eventType)) return null;
  const payload: WebhookPayload = {
    event_id: randomUUID(),
    event_type: eventType,
    occurred_at: new Date(now).toISOString(),
    job: {
      uuid: job.uuid,
      status: job.status,
      status_detail: job.status_detail,
      error_message: job.error_message,
      error_type: job.error_type,
      result_ready: isResultReady(job),
    },
  };
  return {
    event_id: payload.event_id,
    job_uuid: job.uuid,
    owner: job.owner,
    event_type: eventType,
    url: settings.url,
    destination: destinationOf(settings.url),
    secret: settings.secret ?? null,
    body: JSON.stringify(payload),
    state: 'pending',
    next_attempt_at: now + firstDelayMs,
    lease_owner: null,
    lease_expires_at: null,
    created_at: now,
    updated_at: now,
  };
}
