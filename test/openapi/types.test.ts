import { describe, expect, expectTypeOf, it } from 'vitest';
import type * as Client from '../../src/index.js';
import type { ApiDelivery } from '../../src/webhooks/service.js';
import type { ApiJob, ResultLink } from '../../src/contract/api.js';
import type { toApiEndpoint } from '../../src/webhooks/endpoints.js';
import type { WebhookPayload } from '../../src/webhooks/events.js';
import type { describeJobTypes } from '../../src/http/routes/job-types.js';
import type * as S from '../../src/http/schemas.js';
import type { ERROR_TYPES } from '../../src/contract/api.js';

/**
 * Compile-time agreement (enforced by `tsc --noEmit`, which covers test/): the client's types,
 * the documented zod shapes (schemas.ts → OpenAPI) and the types the server builds are the same.
 * A field added on one side and not the others fails the typecheck.
 */

/** A loose zod object's type without its index signature. */
type Known<T> = { [K in keyof T as string extends K ? never : K]: T[K] };

describe('one shape everywhere', () => {
  it('the job', () => {
    expectTypeOf<Client.ApiJob>().toEqualTypeOf<ApiJob>();
    expectTypeOf<Known<S.ApiJobShape>>().branded.toEqualTypeOf<
      Omit<ApiJob, 'error_type'> & { error_type: (typeof ERROR_TYPES)[number] | null }
    >();
    // The server's error_type is a string column; every value it writes is one of ERROR_TYPES.
    expectTypeOf<(typeof ERROR_TYPES)[number]>().toExtend<ApiJob['error_type']>();
    expectTypeOf<Client.JobStatus>().toEqualTypeOf<ApiJob['status']>();
  });

  it('the result link', () => {
    expectTypeOf<Client.ResultLink>().toEqualTypeOf<ResultLink>();
    expectTypeOf<Known<S.ResultLinkShape>>().branded.toEqualTypeOf<ResultLink>();
  });

  it('the webhook payload', () => {
    expectTypeOf<Known<S.WebhookPayloadShape>>()
      .pick<'event_id' | 'event_type' | 'occurred_at'>()
      .toEqualTypeOf<Pick<WebhookPayload, 'event_id' | 'event_type' | 'occurred_at'>>();
    expectTypeOf<keyof Known<S.WebhookPayloadShape['job']>>().toEqualTypeOf<keyof WebhookPayload['job']>();
  });

  it('webhook deliveries', () => {
    expectTypeOf<Client.Delivery>().toEqualTypeOf<ApiDelivery>();
    expectTypeOf<keyof Known<S.DeliveryShape>>().toEqualTypeOf<keyof ApiDelivery>();
  });

  it('webhook endpoints and their deliveries', () => {
    type Endpoint = ReturnType<typeof toApiEndpoint>;
    expectTypeOf<Client.WebhookEndpoint>().toEqualTypeOf<Endpoint>();
    expectTypeOf<keyof Known<S.EndpointShape>>().toEqualTypeOf<keyof Endpoint>();
    expectTypeOf<keyof Known<S.EndpointDeliveryShape>>().toEqualTypeOf<keyof Client.EndpointDelivery>();
  });

  it('job types', () => {
    type Server = ReturnType<typeof describeJobTypes>[number];
    expectTypeOf<keyof Client.JobTypeInfo>().toEqualTypeOf<keyof Server>();
    expectTypeOf<keyof Known<S.JobTypeInfoShape>>().toEqualTypeOf<keyof Server>();
    expect(true).toBe(true);
  });
});
