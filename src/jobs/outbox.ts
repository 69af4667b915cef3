import { v7 as timeOrderedUuid } from 'uuid';
import { isTerminalStatus } from '../contract/api.js';
import type { EndpointRow } from '../store/webhook-endpoints.js';
import type { NewWebhookEvent } from '../store/webhooks.js';
import { destinationOf, type WebhookPayload } from '../webhooks/events.js';
import { EVENT_TYPES, type EventType, type WebhookSettings } from '../contract/webhook.js';
import { isResultReady, type JobRow } from './view.js';

/**
 * The event a terminal job announces, with a fresh event id (one per delivery row). The id is a
 * UUIDv7: time-ordered, so a new event row and its attempts' index entries land at the end of their
 * B-trees instead of on a random page each (on SQLite, every attempt's recording dirtied its own page).
 */
function payloadOf(job: JobRow, eventType: EventType, now: number): WebhookPayload {
  return {
    event_id: timeOrderedUuid(),
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
}

interface Target {
  url: string;
  secret: string | null;
  endpoint_id?: string;
  /** `skipped` for a disabled endpoint: on record, never sent (recover can queue it). */
  state: 'pending' | 'skipped';
}

function outboxRow(
  job: JobRow,
  payload: WebhookPayload,
  to: Target,
  now: number,
  firstDelayMs: number,
): NewWebhookEvent {
  return {
    event_id: payload.event_id,
    job_uuid: job.uuid,
    owner: job.owner,
    event_type: payload.event_type,
    url: to.url,
    destination: destinationOf(to.url),
    secret: to.secret,
    endpoint_id: to.endpoint_id ?? null,
    body: JSON.stringify(payload),
    state: to.state,
    next_attempt_at: to.state === 'pending' ? now + firstDelayMs : null,
    lease_owner: null,
    lease_expires_at: null,
    created_at: now,
    updated_at: now,
  };
}

/**
 * The outbox row for a job that has just reached a terminal state, or null when the job has
 * no webhook or did not subscribe to this event. Called inside the transition's transaction.
 */
export function terminalEvent(job: JobRow, now: number, firstDelayMs = 0): NewWebhookEvent | null {
  if (!job.webhook || !isTerminalStatus(job.status)) return null;
  const settings = JSON.parse(job.webhook) as WebhookSettings;
  const eventType: EventType = `job.${job.status}`;
  if (!(settings.events ?? EVENT_TYPES).includes(eventType)) return null;
  const to: Target = { url: settings.url, secret: settings.secret ?? null, state: 'pending' };
  return outboxRow(job, payloadOf(job, eventType, now), to, now, firstDelayMs);
}

/**
 * One outbox row per owner endpoint subscribed to each finished job's event: pending for an
 * enabled endpoint, skipped for a disabled one. The secret is not copied: the dispatcher signs
 * with the endpoint's secrets of the moment (a rotation applies to retries too).
 */
export function endpointEvents(
  jobs: readonly JobRow[],
  endpoints: readonly EndpointRow[],
  now: number,
  firstDelayMs = 0,
): NewWebhookEvent[] {
  const out: NewWebhookEvent[] = [];
  for (const job of jobs) {
    if (!isTerminalStatus(job.status)) continue;
    const eventType: EventType = `job.${job.status}`;
    for (const ep of endpoints) {
      if (ep.owner !== job.owner || !(JSON.parse(ep.events) as string[]).includes(eventType)) continue;
      const state = ep.status === 'enabled' ? 'pending' : 'skipped';
      const to: Target = { url: ep.url, secret: null, endpoint_id: ep.id, state };
      const at = job.finished_at ?? now;
      out.push(outboxRow(job, payloadOf(job, eventType, at), to, now, firstDelayMs));
    }
  }
  return out;
}
