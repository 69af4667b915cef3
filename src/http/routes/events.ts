import { PassThrough } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { Gauge } from 'prom-client';
import { z } from 'zod';
import type { JobService } from '../../jobs/service.js';
import type { ApiJob } from '../../contract/api.js';
import type { Metrics } from '../../metrics.js';
import { wakeOn, type Signals } from '../../signals.js';
import { ApiError } from '../api-error.js';
import { fail } from '../envelope.js';
import { COMMON_ERRORS, jobParams, jobUuid, responses } from '../schemas.js';
import { Wakeable } from '../../runtime/wake.js';
import { PROGRESS_EVENT_INTERVAL_MS, isTerminalStatus } from '../../contract/api.js';

/**
 * GET /api/v1/jobs/{uuid}/events: the job's state as Server-Sent Events.
 *
 * - `event: status` when `status` changes (the first event is always the current state);
 * - `event: progress` when only `status_detail` or `progress` changes (a processor's progress,
 *   queue position), at most one every PROGRESS_EVENT_INTERVAL_MS (500 ms) per stream: a change
 *   inside the interval is sent at its end (the latest state), never dropped;
 * - the stream ends right after the `status` event of a terminal state.
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

/** One SSE message; `data` is one line of JSON (JSON.stringify never emits a raw newline). */
function message(id: number, event: string, data: unknown): string {
  return `id: ${id}\nevent: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

export function eventRoutes(app: FastifyInstance, deps: EventRouteDeps, opts: EventStreamOptions = {}): void {
  const pollMs = opts.pollMs ?? 1000;
  const keepAliveMs = opts.keepAliveMs ?? 15_000;
  const maxPerOwner = opts.maxPerOwner ?? MAX_STREAMS_PER_OWNER;
  const perOwner = new Map<string, number>();
  // Open streams, for operators and for the test that a disconnect frees everything.
  const open = new Gauge({
    name: 'media_jobs_event_streams',
    help: 'Open Server-Sent Events streams (GET /api/v1/jobs/{uuid}/events).',
    registers: [deps.metrics.registry],
  });
  const closers = new Set<() => void>();
  // Server shutdown ends every stream (they would otherwise hold close() open).
  app.addHook('onClose', (_app, done) => {
    for (const close of [...closers]) close();
    done();
  });

  app.withTypeProvider<ZodTypeProvider>().get(
    '/jobs/:uuid/events',
    {
      schema: {
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
      },
    },
    async (request, reply) => {
      const uuid = jobUuid(request.params.uuid);
      const owner = request.owner;
      const first = await deps.service.status(owner, uuid); // another owner's job: the same 404
      const count = perOwner.get(owner) ?? 0;
      if (count >= maxPerOwner)
        throw new ApiError(
          429,
          `too many open event streams (at most ${maxPerOwner} per API key owner); close one first`,
          { 'retry-after': '5' },
        );
      perOwner.set(owner, count + 1);
      open.inc();

      const stream = new PassThrough();
      let seq = 0;
      let last: ApiJob | undefined;
      let closed = false;
      // Read through a function: the stream may close during any await (TS would keep `closed` narrowed).
      const isClosed = () => closed;
      // Woken by this job's finish or progress; a signal during a read makes the next wait return at once.
      const changed = deps.signals
        ? wakeOn(deps.signals, ['job-finished', 'job-progress'], (u) => u === uuid)
        : Object.assign(new Wakeable(), { close() {} });
      const gone = new AbortController();

      const release = () => {
        if (closed) return;
        closed = true;
        gone.abort();
        clearInterval(keepAlive);
        changed.close();
        closers.delete(end);
        const n = (perOwner.get(owner) ?? 1) - 1;
        if (n > 0) perOwner.set(owner, n);
        else perOwner.delete(owner);
        open.dec();
      };
      const end = () => {
        release();
        stream.end();
      };
      let lastProgressAt = -Infinity;
      /** A progress change waits for the end of the interval (then the latest state is sent). */
      let held = false;
      const emit = (job: ApiJob) => {
        held = false;
        if (
          last &&
          last.status === job.status &&
          last.status_detail === job.status_detail &&
          JSON.stringify(last.progress) === JSON.stringify(job.progress)
        )
          return;
        const isStatus = !last || last.status !== job.status;
        if (!isStatus) {
          const now = performance.now();
          if (now - lastProgressAt < PROGRESS_EVENT_INTERVAL_MS) {
            held = true;
            return;
          }
          lastProgressAt = now;
        }
        stream.write(message(++seq, isStatus ? 'status' : 'progress', job));
        last = job;
      };
      // One read per wake-up or per pollMs (queue positions move without a signal), until the end.
      const follow = async (): Promise<void> => {
        while (!isClosed()) {
          const waitMs = held ? Math.max(1, lastProgressAt + PROGRESS_EVENT_INTERVAL_MS - performance.now()) : pollMs;
          await changed.wait(waitMs, gone.signal);
          if (isClosed()) return;
          let job: ApiJob;
          try {
            job = await deps.service.status(owner, uuid);
          } catch (err) {
            request.log.warn({ err, job_uuid: uuid }, 'event stream read failed');
            if (!isClosed()) {
              stream.write(message(++seq, 'error', fail('the job could not be read; reconnect to resume')));
              end();
            }
            return;
          }
          if (isClosed()) return;
          emit(job);
          if (isTerminalStatus(job.status)) {
            end();
            return;
          }
        }
      };
      const keepAlive = setInterval(() => stream.write(': keep-alive\n\n'), keepAliveMs);
      closers.add(end);
      // The response closes when we end it or when the client goes away: release either way.
      reply.raw.on('close', () => {
        release();
        stream.destroy();
      });

      // Browsers reconnect after `retry` ms if the connection drops before the end.
      stream.write(`retry: ${Math.max(1000, pollMs)}\n\n`);
      emit(first);
      if (isTerminalStatus(first.status)) end();
      else void follow();

      return reply
        .code(200)
        .header('content-type', 'text/event-stream; charset=utf-8')
        .header('cache-control', 'no-cache, no-transform')
        .header('x-accel-buffering', 'no')
        .send(stream);
    },
  );
}
