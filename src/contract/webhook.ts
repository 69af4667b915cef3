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

/**
 * A delivery's state: `pending` while attempts remain, then `delivered` or `failed` for good;
 * `skipped`: an owner endpoint's delivery while the endpoint was disabled (recover queues it again).
 */
export const DELIVERY_STATES = ['pending', 'delivered', 'failed', 'skipped'] as const;

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

/** What a missing endpoint and another owner's endpoint both answer, word for word (404). */
export const ENDPOINT_NOT_FOUND = 'webhook endpoint not found';
/** Endpoints one owner may have at once. */
export const MAX_ENDPOINTS_PER_OWNER = 20;
export const ENDPOINT_STATUSES = ['enabled', 'disabled'] as const;
export type EndpointStatus = (typeof ENDPOINT_STATUSES)[number];

/** An owner's webhook endpoint: receives every subscribed event of every job of the owner. */
export interface WebhookEndpoint {
  id: string;
  url: string;
  events: EventType[];
  description: string;
  status: EndpointStatus;
  /** Why it was disabled (410 Gone, or failing for WEBHOOK_DISABLE_AFTER), else null. */
  disabled_reason: string | null;
  disabled_at: string | null;
  /** `whsec_…`: signs every delivery (X-Service-Signature and webhook-signature). */
  secret: string;
  created_at: string;
  updated_at: string;
}

/** The body of POST /webhook-endpoints. */
export interface NewWebhookEndpoint {
  url: string;
  /** Defaults to all three. */
  events?: EventType[];
  description?: string;
}

/** The body of PATCH /webhook-endpoints/{id}: any of the fields. */
export type WebhookEndpointChanges = Partial<NewWebhookEndpoint>;

/** One delivery of an endpoint (its log): a delivery with the job it announces. */
export interface EndpointDelivery extends Delivery {
  job_uuid: string;
}

/** `data` of GET /webhook-endpoints/{id}/deliveries, newest first. */
export interface EndpointDeliveryList {
  deliveries: EndpointDelivery[];
  /** Pass as `cursor` for older deliveries; null on the last page. */
  next_cursor: string | null;
}
