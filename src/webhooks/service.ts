import type { Clock } from '../clock.js';
import { notFound } from '../errors.js';
import type { Store } from '../store/store.js';
import { getJobView } from '../store/jobs.js';
import {
  finishManualAttempt,
  getEvent,
  listEventsWithAttempts,
  type WebhookAttemptRow,
  type WebhookEventRow,
} from '../store/webhooks.js';
import type { WebhookSender } from './send.js';
import type { Delivery, DeliveryAttempt } from '../contract/webhook.js';
import { JOB_NOT_FOUND } from '../contract/api.js';

/** One attempt and one event with its attempts, as the API shows them: the contract's shapes. */
export type ApiDeliveryAttempt = DeliveryAttempt;
export type ApiDelivery = Delivery;

const EVENT_NOT_FOUND = 'event not found';
const iso = (ms: number | string | null) => (ms === null ? null : new Date(Number(ms)).toISOString());

function toApiAttempt(a: WebhookAttemptRow): ApiDeliveryAttempt {
  return {
    attempt: a.attempt,
    started_at: iso(a.started_at)!,
    http_status: a.http_status,
    error: a.error,
    duration_ms: a.duration_ms,
    ok: a.ok === 1,
    manual: a.manual === 1,
  };
}

export function toApiDelivery(e: WebhookEventRow, attempts: WebhookAttemptRow[]): ApiDelivery {
  return {
    event_id: e.event_id,
    event_type: e.event_type,
    url: e.url,
    state: e.state,
    attempts: attempts.map(toApiAttempt),
    next_attempt_at: e.state === 'pending' ? iso(e.next_attempt_at) : null,
    created_at: iso(e.created_at)!,
  };
}

export interface WebhookServiceDeps {
  store: Store;
  clock: Clock;
  sender: WebhookSender;
}

/** The webhook routes' operations, owner-scoped like every job operation. */
export class WebhookService {
  constructor(private readonly deps: WebhookServiceDeps) {}

  private async requireJob(owner: string, uuid: string): Promise<void> {
    if (!(await getJobView(this.deps.store.db, uuid, owner))) throw notFound(JOB_NOT_FOUND);
  }

  async list(owner: string, uuid: string): Promise<{ deliveries: ApiDelivery[] }> {
    await this.requireJob(owner, uuid);
    const rows = await listEventsWithAttempts(this.deps.store.db, uuid, owner);
    return { deliveries: rows.map((r) => toApiDelivery(r.event, r.attempts)) };
  }

  /**
   * Sends the event again now (same event id, same bytes, fresh timestamp and signature) and
   * records it as a manual attempt. A success delivers a pending or failed event; otherwise the
   * event's state and schedule are left as they were. Answers with the delivery afterwards.
   */
  async redeliver(owner: string, uuid: string, eventId: string): Promise<ApiDelivery> {
    await this.requireJob(owner, uuid);
    const { store, clock, sender } = this.deps;
    const event = await getEvent(store.db, uuid, eventId, owner);
    if (!event) throw notFound(EVENT_NOT_FOUND);
    const result = await sender.send(event);
    await finishManualAttempt(store.db, event.event_id, { ...result, manual: true }, clock.now());
    const [row] = (await listEventsWithAttempts(store.db, uuid, owner)).filter(
      (r) => r.event.event_id === event.event_id,
    );
    return toApiDelivery(row!.event, row!.attempts);
  }
}
