import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Store } from './store/db.js';
import { countActive } from './store/jobs.js';

/** Prometheus metrics of one app (its own registry, so several apps can share a process in tests). */
export class Metrics {
  readonly registry = new Registry();
  readonly jobsSubmitted = new Counter({
    name: 'media_jobs_jobs_submitted_total',
    help: 'Jobs accepted by submit (replays excluded).',
    labelNames: ['job_type'],
    registers: [this.registry],
  });
  readonly jobsFinished = new Counter({
    name: 'media_jobs_jobs_finished_total',
    help: 'Jobs that reached a terminal state.',
    labelNames: ['job_type', 'status'],
    registers: [this.registry],
  });
  readonly processingSeconds = new Histogram({
    name: 'media_jobs_job_processing_seconds',
    help: 'Time from claim to terminal state, per attempt that finished the job.',
    labelNames: ['job_type', 'status'],
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300],
    registers: [this.registry],
  });
  readonly webhookAttempts = new Counter({
    name: 'media_jobs_webhook_attempts_total',
    help: 'Webhook delivery attempts by outcome (success, http_error, timeout, network_error, blocked).',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly httpSeconds = new Histogram({
    name: 'media_jobs_http_request_duration_seconds',
    help: 'HTTP request latency by route.',
    labelNames: ['method', 'route', 'status_code'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5],
    registers: [this.registry],
  });

  constructor(store: Store) {
    collectDefaultMetrics({ register: this.registry, prefix: 'media_jobs_' });
    // Queue depth is read from the database at scrape time, so it is true across processes.
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
  }
}
