import { sql, type Insertable, type Kysely, type Selectable } from 'kysely';
import type { Database, WebhookEndpointsTable } from './schema.js';
import type { WebhookAttemptRow, WebhookEventRow } from './webhooks.js';

/**
 * Owner endpoints and their deliveries (webhook_events rows with an endpoint_id). Every query is
 * a primary-key seek, an owner's range of webhook_endpoints_owner, or one endpoint's range of a
 * partial index of migration 011: none grows with the jobs or the per-job deliveries.
 */

export type EndpointRow = Selectable<WebhookEndpointsTable>;
export type NewEndpoint = Insertable<WebhookEndpointsTable>;

export async function insertEndpoint(db: Kysely<Database>, row: NewEndpoint): Promise<void> {
  await db.insertInto('webhook_endpoints').values(row).execute();
}

/** An owner's endpoints, newest first; at most `limit`. */
export function listEndpoints(db: Kysely<Database>, owner: string, limit: number): Promise<EndpointRow[]> {
  return db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('owner', '=', owner)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
}

/** One endpoint of `owner`; another owner's is indistinguishable from a missing one. */
export function getEndpoint(db: Kysely<Database>, owner: string, id: string): Promise<EndpointRow | undefined> {
  return db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('id', '=', id)
    .where('owner', '=', owner)
    .executeTakeFirst();
}

/** The endpoints of these owners (the fan-out of a batch of terminal states). */
export function endpointsOfOwners(db: Kysely<Database>, owners: readonly string[]): Promise<EndpointRow[]> {
  if (owners.length === 0) return Promise.resolve([]);
  return db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('owner', 'in', [...owners])
    .orderBy('created_at')
    .execute();
}

/** Endpoints by id (the dispatcher's secrets for what it claimed). */
export function endpointsByIds(db: Kysely<Database>, ids: readonly string[]): Promise<EndpointRow[]> {
  if (ids.length === 0) return Promise.resolve([]);
  return db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('id', 'in', [...ids])
    .execute();
}

export interface EndpointChanges {
  url?: string;
  destination?: string;
  events?: string;
  description?: string;
}

/** Applies a PATCH; a new URL also redirects the endpoint's pending deliveries. */
export async function updateEndpoint(
  db: Kysely<Database>,
  owner: string,
  id: string,
  changes: EndpointChanges,
  now: number,
): Promise<EndpointRow | undefined> {
  return db.transaction().execute(async (trx) => {
    const { destination, ...columns } = changes;
    const row = await trx
      .updateTable('webhook_endpoints')
      .set({ ...columns, updated_at: now })
      .where('id', '=', id)
      .where('owner', '=', owner)
      .returningAll()
      .executeTakeFirst();
    if (row && changes.url !== undefined)
      await pendingOf(trx, id)
        .set({ url: changes.url, destination: destination ?? changes.url, updated_at: now })
        .execute();
    return row;
  });
}

/** The endpoint's pending deliveries (webhook_events_endpoint_pending). */
function pendingOf(db: Kysely<Database>, id: string) {
  return db
    .updateTable('webhook_events')
    .where('endpoint_id', '=', id)
    .where(sql<boolean>`endpoint_id IS NOT NULL AND state = 'pending'`);
}

/** Pending deliveries become `skipped`: no more attempts (a lease in flight loses its recording). */
function skipPending(db: Kysely<Database>, id: string, now: number) {
  return pendingOf(db, id)
    .set({ state: 'skipped', next_attempt_at: null, lease_owner: null, lease_expires_at: null, updated_at: now })
    .execute();
}

/** Deletes the endpoint; its pending deliveries are skipped (its log goes with it from the API). */
export async function deleteEndpoint(db: Kysely<Database>, owner: string, id: string, now: number): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const gone = await trx
      .deleteFrom('webhook_endpoints')
      .where('id', '=', id)
      .where('owner', '=', owner)
      .returning('id')
      .executeTakeFirst();
    if (gone) await skipPending(trx, id, now);
    return gone !== undefined;
  });
}

/** A new secret; the current one stays valid (a second signature) until `previousUntil`. */
export function rotateSecret(
  db: Kysely<Database>,
  owner: string,
  id: string,
  secret: string,
  previousUntil: number,
  now: number,
): Promise<EndpointRow | undefined> {
  return db
    .updateTable('webhook_endpoints')
    .set({
      previous_secret: sql<string>`secret`,
      previous_secret_expires_at: previousUntil,
      secret,
      updated_at: now,
    })
    .where('id', '=', id)
    .where('owner', '=', owner)
    .returningAll()
    .executeTakeFirst();
}

/** Turns an endpoint back on, with a clean failure record (what was skipped stays skipped). */
export function enableEndpoint(
  db: Kysely<Database>,
  owner: string,
  id: string,
  now: number,
): Promise<EndpointRow | undefined> {
  return db
    .updateTable('webhook_endpoints')
    .set({ status: 'enabled', disabled_reason: null, disabled_at: null, failing_since: null, updated_at: now })
    .where('id', '=', id)
    .where('owner', '=', owner)
    .returningAll()
    .executeTakeFirst();
}

/**
 * Disables an enabled endpoint and skips its pending deliveries; the endpoint's row when this call
 * disabled it (undefined when it was disabled or gone already).
 */
export async function disableEndpoint(
  db: Kysely<Database>,
  id: string,
  reason: string,
  now: number,
): Promise<EndpointRow | undefined> {
  const row = await db
    .updateTable('webhook_endpoints')
    .set({ status: 'disabled', disabled_reason: reason, disabled_at: now, failing_since: null, updated_at: now })
    .where('id', '=', id)
    .where('status', '=', 'enabled')
    .returningAll()
    .executeTakeFirst();
  if (row) await skipPending(db, id, now);
  return row;
}

/**
 * Queues once more every failed or skipped delivery of the endpoint whose event occurred at or
 * after `since`, to its current URL with a full retry schedule. Purged jobs' deliveries (their
 * body erased) stay as they are. Returns how many were queued.
 */
export async function recoverDeliveries(
  db: Kysely<Database>,
  endpoint: Pick<EndpointRow, 'id' | 'url'>,
  destination: string,
  since: number,
  firstDelayMs: number,
  now: number,
): Promise<number> {
  const { numUpdatedRows } = await db
    .updateTable('webhook_events')
    .set({
      state: 'pending',
      attempts: 0,
      next_attempt_at: now + firstDelayMs,
      url: endpoint.url,
      destination,
      lease_owner: null,
      lease_expires_at: null,
      updated_at: now,
    })
    .where('endpoint_id', '=', endpoint.id)
    .where(sql<boolean>`endpoint_id IS NOT NULL AND state IN ('failed', 'skipped')`)
    .where('created_at', '>=', since)
    .where('body', '<>', '{}')
    .executeTakeFirst();
  return Number(numUpdatedRows);
}

/** The endpoint's deliveries, newest first, at most `limit`, created before the cursor if given. */
export async function endpointDeliveries(
  db: Kysely<Database>,
  endpointId: string,
  limit: number,
  before?: { createdAt: number; eventId: string },
): Promise<Array<{ event: WebhookEventRow; attempts: WebhookAttemptRow[] }>> {
  let q = db
    .selectFrom('webhook_events')
    .selectAll()
    .where('endpoint_id', '=', endpointId)
    .where(sql<boolean>`endpoint_id IS NOT NULL`);
  // A row-value comparison: an index range from the cursor on both databases (an OR is not).
  if (before) q = q.where(sql<boolean>`(created_at, event_id) < (${before.createdAt}, ${before.eventId})`);
  const events = await q.orderBy('created_at', 'desc').orderBy('event_id', 'desc').limit(limit).execute();
  if (events.length === 0) return [];
  const attempts = await db
    .selectFrom('webhook_attempts')
    .selectAll()
    .where(
      'event_id',
      'in',
      events.map((e) => e.event_id),
    )
    .orderBy('id')
    .execute();
  return events.map((event) => ({ event, attempts: attempts.filter((a) => a.event_id === event.event_id) }));
}

/** A finished scheduled attempt of an endpoint delivery, in the order attempts finished. */
export interface EndpointOutcome {
  endpointId: string;
  ok: boolean;
  /** The receiver answered 410 Gone: disable at once. */
  gone: boolean;
  startedAt: number;
}

export interface DisabledEndpoint {
  id: string;
  owner: string;
  url: string;
  /** `gone`: a 410 answer; `failing`: WEBHOOK_DISABLE_AFTER of failures. */
  kind: 'gone' | 'failing';
  reason: string;
}

/**
 * Keeps each endpoint's failure record (failing_since: the first failure after its last success)
 * and disables an endpoint that answered 410 or has failed for `disableAfterMs`. Returns the
 * endpoints this call disabled. Runs in the transaction that records the attempts.
 */
export async function recordEndpointHealth(
  db: Kysely<Database>,
  outcomes: readonly EndpointOutcome[],
  disableAfterMs: number,
  now: number,
): Promise<DisabledEndpoint[]> {
  const byEndpoint = new Map<string, EndpointOutcome[]>();
  for (const o of outcomes) byEndpoint.set(o.endpointId, [...(byEndpoint.get(o.endpointId) ?? []), o]);
  const disabled: DisabledEndpoint[] = [];
  for (const [id, list] of byEndpoint) {
    let lastOk = -1;
    list.forEach((o, i) => {
      if (o.ok) lastOk = i;
    });
    const failures = list.slice(lastOk + 1);
    if (failures.length === 0) {
      await db
        .updateTable('webhook_endpoints')
        .set({ failing_since: null })
        .where('id', '=', id)
        .where('failing_since', 'is not', null)
        .execute();
      continue;
    }
    const first = Math.min(...failures.map((f) => f.startedAt));
    const row = await db
      .updateTable('webhook_endpoints')
      .set({ failing_since: lastOk >= 0 ? first : sql<number>`coalesce(failing_since, ${first})` })
      .where('id', '=', id)
      .where('status', '=', 'enabled')
      .returning(['failing_since'])
      .executeTakeFirst();
    if (!row) continue;
    const since = Number(row.failing_since);
    const kind = failures.some((f) => f.gone) ? 'gone' : now - since >= disableAfterMs ? 'failing' : undefined;
    if (!kind) continue;
    const reason =
      kind === 'gone'
        ? 'the receiver answered 410 Gone'
        : `every attempt failed since ${new Date(since).toISOString()}`;
    const off = await disableEndpoint(db, id, reason, now);
    if (off) disabled.push({ id, owner: off.owner, url: off.url, kind, reason });
  }
  return disabled;
}

/** Endpoints disabled most recently, across owners (operator view); the table holds only endpoints. */
export function recentlyDisabledEndpoints(db: Kysely<Database>, limit: number): Promise<EndpointRow[]> {
  return db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('status', '=', 'disabled')
    .orderBy('disabled_at', 'desc')
    .limit(limit)
    .execute();
}
