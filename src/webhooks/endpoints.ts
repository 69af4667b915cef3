import { randomBytes } from 'node:crypto';
import type { Clock } from '../clock.js';
import {
  ENDPOINT_NOT_FOUND,
  EVENT_TYPES,
  MAX_ENDPOINTS_PER_OWNER,
  type EndpointDelivery,
  type EndpointDeliveryList,
  type EventType,
  type NewWebhookEndpoint,
  type WebhookEndpoint,
  type WebhookEndpointChanges,
} from '../contract/webhook.js';
import { conflict, invalid, notFound } from '../errors.js';
import { checkUrl, type LookupAll } from '../media/index.js';
import type { Signals } from '../signals.js';
import type { Store } from '../store/store.js';
import {
  deleteEndpoint,
  enableEndpoint,
  endpointDeliveries,
  getEndpoint,
  insertEndpoint,
  listEndpoints,
  recoverDeliveries,
  rotateSecret,
  updateEndpoint,
  type EndpointRow,
} from '../store/webhook-endpoints.js';
import { WAKE_SIGNAL } from './dispatcher.js';
import { destinationOf } from './events.js';
import { toApiDelivery } from './service.js';
import { SECRET_PREFIX } from './sign.js';

export interface EndpointServiceDeps {
  store: Store;
  clock: Clock;
  signals: Signals;
  allowPrivate: boolean;
  lookup?: LookupAll;
  /** WEBHOOK_SECRET_OVERLAP: how long the secret before a rotation still signs. */
  secretOverlapMs: number;
  /** The retry schedule's first delay (a recovered delivery starts its schedule again). */
  firstDelayMs: number;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** A managed secret: `whsec_` and 24 random bytes in base64 (Standard Webhooks' form). */
export function newSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(24).toString('base64')}`;
}

export function toApiEndpoint(row: EndpointRow): WebhookEndpoint {
  return {
    id: row.id,
    url: row.url,
    events: JSON.parse(row.events) as EventType[],
    description: row.description,
    status: row.status,
    disabled_reason: row.disabled_reason,
    disabled_at: iso(row.disabled_at),
    secret: row.secret,
    created_at: iso(row.created_at)!,
    updated_at: iso(row.updated_at)!,
  };
}

/** Delivery-log cursor: the last row's creation time and event id. */
const encodeCursor = (createdAt: number, eventId: string) =>
  Buffer.from(`${createdAt}.${eventId}`).toString('base64url');
function decodeCursor(raw: string): { createdAt: number; eventId: string } {
  const m = /^(\d{1,15})\.(.{1,64})$/.exec(Buffer.from(raw, 'base64url').toString('utf8'));
  if (!m) throw invalid('cursor: is not a cursor this API returned');
  return { createdAt: Number(m[1]), eventId: m[2]! };
}

/** Owner endpoints (POST/GET/PATCH/DELETE /webhook-endpoints…), owner-scoped like jobs. */
export class EndpointService {
  constructor(private readonly deps: EndpointServiceDeps) {}

  private get db() {
    return this.deps.store.db;
  }

  private now(): number {
    return this.deps.clock.now();
  }

  private async require(owner: string, id: string): Promise<EndpointRow> {
    const row = await getEndpoint(this.db, owner, id);
    if (!row) throw notFound(ENDPOINT_NOT_FOUND);
    return row;
  }

  /** The URL rule of media and per-job webhooks, DNS included. */
  private async checkUrl(url: string): Promise<void> {
    const r = await checkUrl(url, { allowPrivate: this.deps.allowPrivate, lookup: this.deps.lookup });
    if (!r.ok) throw invalid(`url: must be a public http or https URL (${r.reason})`);
  }

  async create(owner: string, body: NewWebhookEndpoint): Promise<WebhookEndpoint> {
    await this.checkUrl(body.url);
    if ((await listEndpoints(this.db, owner, MAX_ENDPOINTS_PER_OWNER)).length >= MAX_ENDPOINTS_PER_OWNER)
      throw conflict(`at most ${MAX_ENDPOINTS_PER_OWNER} webhook endpoints per owner: delete one first`);
    const now = this.now();
    const row: EndpointRow = {
      id: `ep_${randomBytes(12).toString('hex')}`,
      owner,
      url: body.url,
      events: JSON.stringify(body.events ?? EVENT_TYPES),
      description: body.description ?? '',
      secret: newSecret(),
      previous_secret: null,
      previous_secret_expires_at: null,
      status: 'enabled',
      disabled_reason: null,
      disabled_at: null,
      failing_since: null,
      created_at: now,
      updated_at: now,
    };
    await insertEndpoint(this.db, row);
    return toApiEndpoint(row);
  }

  async list(owner: string): Promise<{ endpoints: WebhookEndpoint[] }> {
    const rows = await listEndpoints(this.db, owner, MAX_ENDPOINTS_PER_OWNER);
    return { endpoints: rows.map(toApiEndpoint) };
  }

  async get(owner: string, id: string): Promise<WebhookEndpoint> {
    return toApiEndpoint(await this.require(owner, id));
  }

  async update(owner: string, id: string, changes: WebhookEndpointChanges): Promise<WebhookEndpoint> {
    await this.require(owner, id);
    if (changes.url !== undefined) await this.checkUrl(changes.url);
    const row = await updateEndpoint(
      this.db,
      owner,
      id,
      {
        url: changes.url,
        destination: changes.url === undefined ? undefined : destinationOf(changes.url),
        events: changes.events === undefined ? undefined : JSON.stringify(changes.events),
        description: changes.description,
      },
      this.now(),
    );
    if (!row) throw notFound(ENDPOINT_NOT_FOUND);
    return toApiEndpoint(row);
  }

  async remove(owner: string, id: string): Promise<Record<string, never>> {
    if (!(await deleteEndpoint(this.db, owner, id, this.now()))) throw notFound(ENDPOINT_NOT_FOUND);
    return {};
  }

  /** A new secret; the old one keeps signing (a second signature) for WEBHOOK_SECRET_OVERLAP. */
  async rotate(owner: string, id: string): Promise<{ secret: string }> {
    const now = this.now();
    const row = await rotateSecret(this.db, owner, id, newSecret(), now + this.deps.secretOverlapMs, now);
    if (!row) throw notFound(ENDPOINT_NOT_FOUND);
    return { secret: row.secret };
  }

  async enable(owner: string, id: string): Promise<WebhookEndpoint> {
    const row = await enableEndpoint(this.db, owner, id, this.now());
    if (!row) throw notFound(ENDPOINT_NOT_FOUND);
    return toApiEndpoint(row);
  }

  /** Queues again every failed or skipped delivery whose event occurred since `since`. */
  async recover(owner: string, id: string, since: string): Promise<{ count: number }> {
    const row = await this.require(owner, id);
    const at = Date.parse(since);
    const count = await recoverDeliveries(this.db, row, destinationOf(row.url), at, this.deps.firstDelayMs, this.now());
    if (count > 0) {
      // Dispatchers poll anyway; this makes the first attempt immediate.
      this.deps.signals.deliver(WAKE_SIGNAL, '');
      this.deps.signals.transport?.publish(WAKE_SIGNAL, '');
    }
    return { count };
  }

  async deliveries(owner: string, id: string, limit: number, cursor?: string): Promise<EndpointDeliveryList> {
    await this.require(owner, id);
    const rows = await endpointDeliveries(this.db, id, limit + 1, cursor ? decodeCursor(cursor) : undefined);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    return {
      deliveries: page.map((r): EndpointDelivery => ({
        ...toApiDelivery(r.event, r.attempts),
        job_uuid: r.event.job_uuid,
      })),
      next_cursor: rows.length > limit && last ? encodeCursor(last.event.created_at, last.event.event_id) : null,
    };
  }
}
