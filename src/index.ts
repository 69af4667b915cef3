/**
 * Package entry point: the typed API client and the webhook verifier for receivers.
 *
 *   import { MediaJobsClient, verifyWebhook } from 'media-jobs';
 *
 * Kept free of the service's runtime (no database, HTTP server or processors is loaded).
 */
export {
  verifyWebhook,
  WebhookVerificationError,
  type VerifyWebhookOptions,
  type WebhookHeaders,
  type WebhookVerificationReason,
} from './webhooks/verify.js';
export {
  computeSignature,
  computeStandardSignature,
  EVENT_ID_HEADER,
  SIGNATURE_HEADER,
  STANDARD_ID_HEADER,
  STANDARD_SIGNATURE_HEADER,
  STANDARD_TIMESTAMP_HEADER,
  TIMESTAMP_HEADER,
} from './webhooks/sign.js';
export type { EventType, WebhookPayload } from './webhooks/events.js';
export {
  MediaJobsClient,
  MediaJobsError,
  WaitTimeoutError,
  type ApiJob,
  type Delivery,
  type DeliveryAttempt,
  type DownloadResult,
  type JobList,
  type JobStatus,
  type JobTypeInfo,
  type ListJobsOptions,
  type MediaJobsClientOptions,
  type RequestOptions,
  type ResultLink,
  type StatusOptions,
  type SubmitBody,
  type SubmitOptions,
  type WaitOptions,
  type WebhookSettings,
} from './client/index.js';
