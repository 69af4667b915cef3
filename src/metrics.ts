import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Store } from './store/store.js';
import { countActive } from './store/jobs.js';
import { readJobTotals, type JobTotal } from './store/totals.js';
import { SeriesHistogram } from './series-histogram.js';

/**
 * Prometheus metrics of one app (its own registry, so several apps can share a process in tests).
 *
 * Two kinds: the cluster's figures, read from database counters at scrape time, so
 * one scrape of any process in any role is the whole cluster's truth (`media_jobs_jobs_*_total`,
 * `media_jobs_queue_depth`); and this process's own figures, named `media_jobs_process_*` or
 * naturally per process (HTTP latency, processing time of the jobs it ran, webhook attempts it
 * made, Node's process metrics).
 */
export class Metrics {
  readonly registry = new Registry();
  /** Submits accepted by this process's API (replays excluded). */
  readonly jobsSubmitted = new Counter({
    name: 'media_jobs_process_jobs_submitted_total',
    help: 'Jobs accepted by submit in this process (replays excluded). The cluster total is media_jobs_jobs_submitted_total.',
    labelNames: ['job_type'],
    registers: [this.registry],
  });
  /** Terminal states written by this process (its workers, cancels through its API, its lease recovery). */
  readonly jobsFinished = new Counter({
    name: 'media_jobs_process_jobs_finished_total',
    help: 'Jobs this process moved to a terminal state. The cluster total is media_jobs_jobs_finished_total.',
    labelNames: ['job_type', 'status'],
    registers: [this.registry],
  });
  readonly processingSeconds = new Histogram({
    name: 'media_jobs_job_processing_seconds',
    help: 'Time from claim to terminal state, per attempt that finished the job, in this process.',
    labelNames: ['job_type', 'status'],
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300],
    registers: [this.registry],
  });
  readonly webhookAttempts = new Counter({
    name: 'media_jobs_webhook_attempts_total',
    help: 'Webhook delivery attempts made by this process, by outcome (success, http_error, timeout, network_error, blocked).',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly webhookEndpointsDisabled = new Counter({
    name: 'media_jobs_webhook_endpoints_disabled_total',
    help: 'Owner webhook endpoints this process disabled, by reason (gone: a 410 answer; failing: WEBHOOK_DISABLE_AFTER of failures).',
    labelNames: ['reason'],
    registers: [this.registry],
  });
  /** Observed on every request (http/access-log.ts): series held by the hook, no label hashing per request. */
  readonly httpSeconds = new SeriesHistogram(
    'media_jobs_http_request_duration_seconds',
    'HTTP request latency of this process by route.',
    ['method', 'route', 'status_code'],
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5],
    this.registry,
  );

  constructor(store: Store) {
    collectDefaultMetrics({ register: this.registry, prefix: 'media_jobs_' });
    // Queue depth and the job totals are read from the database at scrape time: a few rows of
    // trigger-kept counters (store/totals.ts, store/jobs.ts countActive), whatever the backlog.
    new Gauge({
      name: 'media_jobs_queue_depth',
      help: 'Jobs waiting (queued) and running (processing), across all processes.',
      labelNames: ['status'],
      registers: [this.registry],
      async collect() {
        const c = await countActive(store.db);
        this.set({ status: 'queued' }, c.queued);
        this.set({ status: 'processing' }, c.processing);
      },
    });
    // Both totals come from one read per scrape (the registry collects every metric at once).
    let reading: Promise<JobTotal[]> | undefined;
    const totals = () => {
      reading ??= readJobTotals(store.db).finally(() => {
        reading = undefined;
      });
      return reading;
    };
    new Counter({
      name: 'media_jobs_jobs_submitted_total',
      help: 'Jobs accepted by submit, across all processes (replays excluded).',
      labelNames: ['job_type'],
      registers: [this.registry],
      async collect() {
        const rows = await totals();
        this.reset();
        for (const r of rows) if (r.event === 'submitted') this.inc({ job_type: r.job_type }, r.n);
      },
    });
    new Counter({
      name: 'media_jobs_jobs_finished_total',
      help: 'Jobs that reached a terminal state, across all processes.',
      labelNames: ['job_type', 'status'],
      registers: [this.registry],
      async collect() {
        const rows = await totals();
        this.reset();
        for (const r of rows) if (r.event !== 'submitted') this.inc({ job_type: r.job_type, status: r.event }, r.n);
      },
    });
  }
}
