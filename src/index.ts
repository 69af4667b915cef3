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
export type { WebhookPayload } from './webhooks/events.js';
export {
  MediaJobsClient,
  MediaJobsError,
  WaitTimeoutError,
  type DownloadResult,
  type ListJobsOptions,
  type MediaJobsClientOptions,
  type RequestOptions,
  type StatusOptions,
  type SubmitOptions,
  type WaitOptions,
} from './client/index.js';
// The package's entry points alone publish the contract's shapes (lint forbids re-exports elsewhere).
export type { ApiJob, JobList, JobStatus, JobTypeInfo, ResultLink, SubmitBody } from './contract/api.js';
export type {
  Delivery,
  DeliveryAttempt,
  EndpointDelivery,
  EndpointDeliveryList,
  EventType,
  NewWebhookEndpoint,
  WebhookEndpoint,
  WebhookEndpointChanges,
  WebhookSettings,
} from './contract/webhook.js';
