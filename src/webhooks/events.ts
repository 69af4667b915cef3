import { randomUUID } from 'node:crypto';
import type { Insertable } from 'kysely';
import type { WebhookEventsTable } from '../store/schema.js';
import { isTerminal } from '../jobs/states.js';
import { isResultReady, type JobRow } from '../jobs/view.js';

export const EVENT_TYPES = ['job.completed', 'job.failed', 'job.cancelled'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** The `webhook` object stored with a job (validated at submit). */
export interface WebhookSettings {
  url: string;
  secret?: string;
  events?: EventType[];
}

/** The delivery body (DESIGN.md §2 Webhooks). Frozen at creation: every attempt sends these bytes. */
export interface WebhookPayload {
  event_id: string;
  event_type: EventType;
  occurred_at: string;
  job: {
    uuid: string;
    status: string;
    status_detail: string;
    error_message: string | null;
    error_type: string | null;
    result_ready: boolean;
  };
}

/**
 * The destination a delivery counts against for per-destination fairness: the URL's origin
 * (scheme, host and port), so one slow or dead host cannot take every delivery slot.
 */
export function destinationOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return url;
  }
}

/**
 * The outbox row for a job that has just reached a terminal state, or null when the job has
 * no webhook or did not subscribe to this event. Called inside the transition's transaction.
 */
export function terminalEvent(job: JobRow, now: number, firstDelayMs = 0): Insertable<WebhookEventsTable> | null {
  if (!job.webhook || !isTerminal(job.status)) return null;
  const settings = JSON.parse(job.webhook) as WebhookSettings;
  const eventType = `job.${job.status}` as EventType;
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
