import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { isTerminalStatus } from '../../contract/api.js';
import type { JobService } from '../../jobs/service.js';
import type { Metrics } from '../../metrics.js';
import type { Signals } from '../../signals.js';
import { COMMON_ERRORS, jobParams, jobUuid, responses } from '../schemas.js';
import { zodApp } from '../zod-app.js';
import { eventId, JobEventStream, OpenStreams } from './event-stream.js';

/**
 * GET /api/v1/jobs/{uuid}/events: the job's state as Server-Sent Events.
 *
 * - `event: status` when `status` changes (the first event is always the current state);
 * - `event: progress` when only `status_detail` or `progress` changes (a processor's progress,
 *   queue position), at most one every PROGRESS_EVENT_INTERVAL_MS (500 ms) per stream: a change
 *   inside the interval is sent at its end (the latest state), never dropped;
 * - the stream ends right after the `status` event of a terminal state;
 * - an event's id names the state it carries (eventId): a reconnect with `Last-Event-ID` gets only
 *   what changed since, and one that has the terminal state gets 204 (EventSource then stops).
 *
 * Terminal states and progress details arrive at once through the `job-finished` and
 * `job-progress` signals (from any process on PostgreSQL; a claim signals only in its own process);
 * queue-position moves and what a signal missed are caught by re-reading the job (one primary-key
 * read, plus the bounded queue-position count) every `pollMs`. The cost is bounded per connection
 * (one wait, one listener, one read per interval) and connections are capped per owner; a client
 * that disconnects releases all three at once.
 */
export interface EventStreamOptions {
  /** How often a stream re-reads its job (default 1 s). */
  pollMs?: number;
  /** An SSE comment this often keeps proxies from closing an idle stream (default 15 s). */
  keepAliveMs?: number;
  /** Open streams per owner in this process (default 32); more answer 429. */
  maxPerOwner?: number;
}

/** Open streams per owner in one process, unless EventStreamOptions says otherwise. */
export const MAX_STREAMS_PER_OWNER = 32;

export interface EventRouteDeps {
  service: JobService;
  signals?: Signals;
  metrics: Metrics;
}

/** GET /jobs/:uuid/events: a stream, not an envelope (errors before it starts are enveloped). */
const watchSchema = () => ({
  operationId: 'watchJob',
  tags: ['Jobs'],
  params: jobParams,
  response: responses(
    {
      200: {
        description: 'A stream of `status` and `progress` events; it ends after the terminal `status` event.',
        schema: z.string(),
        type: 'text/event-stream',
      },
    },
    404,
    ...COMMON_ERRORS,
  ),
});

/**
 * The route: admits a stream (204 when the client has the end already, 429 past the owner's cap)
 * and answers with it; the stream itself (event-stream.ts) follows the job.
 */
export function eventRoutes(app: FastifyInstance, deps: EventRouteDeps, opts: EventStreamOptions = {}): void {
  const pollMs = opts.pollMs ?? 1000;
  const keepAliveMs = opts.keepAliveMs ?? 15_000;
  const streams = new OpenStreams(deps.metrics.registry, opts.maxPerOwner ?? MAX_STREAMS_PER_OWNER);
  // Server shutdown ends every stream (they would otherwise hold close() open).
  app.addHook('onClose', (_app, done) => {
    streams.closeAll();
    done();
  });
  zodApp(app).get('/jobs/:uuid/events', { schema: watchSchema() }, async (request, reply) => {
    const uuid = jobUuid(request.params.uuid);
    const owner = request.owner;
    const read = () => deps.service.status(owner, uuid);
    const first = await read(); // another owner's job: the same 404
    // What the client saw last, when it reconnects (a standard EventSource sends it by itself).
    const seen = request.headers['last-event-id'];
    // It has the end already: 204 tells a standard EventSource to stop reconnecting.
    if (isTerminalStatus(first.status) && seen === eventId(first)) return reply.code(204).send();
    streams.admit(owner);
    const stream = new JobEventStream({
      uuid,
      owner,
      seen,
      pollMs,
      keepAliveMs,
      read,
      signals: deps.signals,
      streams,
      log: request.log,
    });
    reply.raw.on('close', () => stream.onResponseClose());
    stream.start(first);
    return reply
      .code(200)
      .header('content-type', 'text/event-stream; charset=utf-8')
      .header('cache-control', 'no-cache, no-transform')
      .header('x-accel-buffering', 'no')
      .send(stream.body);
  });
}
