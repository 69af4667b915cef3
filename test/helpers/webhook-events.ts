import type { Insertable } from 'kysely';
import type { WebhookEventsTable } from '../../src/store/schema.js';

/**
 * A `webhook_events` row as the outbox holds a job's event for `destination` (an origin): due at
 * `dueAt`, no lease, no secret. Tests that write events straight into the table start from it.
 */
export function webhookEventRow(
  id: string,
  destination: string,
  dueAt: number | null,
  more: Partial<Insertable<WebhookEventsTable>> = {},
): Insertable<WebhookEventsTable> {
  const at = dueAt ?? 0;
  return {
    event_id: id,
    job_uuid: `job-${id}`,
    owner: 'o',
    event_type: 'job.completed',
    url: `${destination}/hook`,
    destination,
    secret: null,
    body: JSON.stringify({ event_id: id }),
    state: 'pending',
    next_attempt_at: dueAt,
    lease_owner: null,
    lease_expires_at: null,
    created_at: at,
    updated_at: at,
    ...more,
  };
}
