/**
 * The contract, webhooks: the event types a job's webhook may subscribe to, the settings a submit
 * carries, and the delivery log's shapes (GET /jobs/{uuid}/webhooks).
 */

/** Webhook event types: one per terminal status. */
export const EVENT_TYPES = ['job.completed', 'job.failed', 'job.cancelled'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export interface WebhookSettings {
  url: string;
  /** When given, deliveries carry X-Service-Signature (verify with verifyWebhook). */
  secret?: string;
  /** Defaults to all three. */
  events?: EventType[];
}

export interface DeliveryAttempt {
  attempt: number;
  started_at: string;
  http_status: number | null;
  error: string | null;
  duration_ms: number;
  ok: boolean;
  manual: boolean;
}

/** A delivery's state: `pending` while attempts remain, then `delivered` or `failed` for good. */
export const DELIVERY_STATES = ['pending', 'delivered', 'failed'] as const;

/** One webhook event of a job and its delivery attempts. */
export interface Delivery {
  event_id: string;
  event_type: string;
  url: string;
  state: (typeof DELIVERY_STATES)[number];
  attempts: DeliveryAttempt[];
  next_attempt_at: string | null;
  created_at: string;
}
