import type { EventType } from '../contract/webhook.js';

/** The `webhook` object stored with a job (validated at submit). */
export interface WebhookSettings {
  url: string;
  secret?: string;
  events?: EventType[];
}

/** The delivery body (docs/api.md, Webhooks). Frozen at creation: every attempt sends these bytes. */
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

/** A stored delivery's destination: its row's, or its URL's origin for a row written without one. */
export function destinationOfRow(row: { destination: string | null; url: string }): string {
  return row.destination ?? destinationOf(row.url);
}
