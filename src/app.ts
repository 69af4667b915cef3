import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { systemClock, type Clock } from './clock.js';
import type { Config } from './config.js';
import { Housekeeping } from './jobs/housekeeping.js';
import { buildServer } from './http/server.js';
import { JobLifecycle } from './jobs/lifecycle.js';
import { JobService } from './jobs/service.js';
import { createLogger } from './log.js';
import type { IsPublic, LookupAll } from './media/index.js';
import { Catalogue, defaultJobTypes } from './processors/catalogue.js';
import type { JobType } from './processors/types.js';
import { Metrics } from './metrics.js';
import { Signals } from './signals.js';
import { StorageHealth } from './storage/health.js';
import { LocalResultStore } from './storage/local.js';
import type { ResultStore } from './storage/types.js';
import { openStore } from './store/db.js';
import type { Store } from './store/store.js';
import { bridgeSignals } from './store/pg-notify.js';
import { sharedSecret } from './store/settings.js';
import { WorkerPool } from './worker/pool.js';
import { loadDeclaredTypes } from './remote/declared-types.js';
import { RemoteWork } from './remote/service.js';
import { WebhookDispatcher } from './webhooks/dispatcher.js';
import { WebhookSender } from './webhooks/send.js';
import { WebhookService } from './webhooks/service.js';
import { EndpointService } from './webhooks/endpoints.js';

export type Role = 'api' | 'worker' | 'all';

export interface AppOptions {
  role?: Role;
  clock?: Clock;
  log?: Logger;
  /** Replaces the default catalogue (benchmarks register a no-op type, tests a slow one). */
  jobTypes?: JobType[];
  /** Test seams for the address rule: DNS and what counts as public. */
  lookup?: LookupAll;
  /** Test seam: wraps the result store (a storage outage during a purge). */
  wrapResults?: (results: ResultStore) => ResultStore;
  isPublic?: IsPublic;
}

export interface App {
  config: Config;
  store: Store;
  server: FastifyInstance;
  service: JobService;
  lifecycle: JobLifecycle;
  workers?: WorkerPool;
  /** The service side of the remote worker protocol. */
  remote: RemoteWork;
  /** Lease recovery, retention, sweeps and planner statistics (every role). */
  housekeeping: Housekeeping;
  /** The webhook outbox dispatcher (worker role). */
  webhooks?: WebhookDispatcher;
  signals: Signals;
  metrics: Metrics;
  log: Logger;
  /** Starts workers (worker role) and listens on config.host:config.port (every role; a worker-only process serves /healthz, /readyz, /metrics). */
  start(): Promise<void>;
  /** Shutdown phases still running (for the shutdown watchdog's report). */
  pendingShutdownPhases(): string[];
  /** Graceful: stop accepting, let running jobs finish within `graceMs`, hand back the rest. */
  stop(graceMs?: number): Promise<void>;
}

/** Wires store, catalogue, service, HTTP, workers and housekeeping for one process. */
export async function createApp(config: Config, opts: AppOptions = {}): Promise<App> {
  const role = opts.role ?? 'all';
  const clock = opts.clock ?? systemClock;
  const log = opts.log ?? createLogger(config.logLevel);
  if (config.mediaAllowPrivateNetworks) {
    log.warn(
      'MEDIA_ALLOW_PRIVATE_NETWORKS is on: media and webhook URLs may point at private and loopback addresses; never use this in production',
    );
  }
  // Declared first: a bad JOB_TYPES_FILE stops start-up before anything is opened.
  const declared = config.remote.jobTypesFile ? loadDeclaredTypes(config.remote.jobTypesFile) : [];
  const store = await openStore(config.databaseUrl, {
    poolSize: config.databasePoolSize,
    connectTimeoutMs: config.databaseConnectTimeoutMs,
    queryTimeoutMs: config.databaseQueryTimeoutMs,
    log,
  });
  const signals = new Signals();
  const unbridge = store.dialect === 'postgres' ? await bridgeSignals(store, signals, log) : undefined;
  const catalogue = new Catalogue([
    ...(opts.jobTypes ?? defaultJobTypes({ threads: config.workerConcurrency, video: config.video })),
    ...declared,
  ]);
  const urlSecret = await sharedSecret(store.db, 'result_url_secret');
  const rs = config.resultStore;
  const local =
    rs.kind === 'local'
      ? new LocalResultStore(path.join(config.dataDir, 'results'), config.publicBaseUrl, urlSecret)
      : undefined;
  const store0: ResultStore =
    local ??
    new (await import('./storage/s3.js')).S3ResultStore({
      ...(rs as Extract<typeof rs, { kind: 's3' }>),
      clockMs: () => clock.now(),
    });
  const results = opts.wrapResults ? opts.wrapResults(store0) : store0;

  const storageHealth = new StorageHealth(results, log);

  const metrics = new Metrics(store);
  const lifecycle = new JobLifecycle({ store, clock, config, signals, log, metrics });
  const service = new JobService({
    store,
    catalogue,
    config,
    clock,
    results,
    lifecycle,
    signals,
    metrics,
    lookup: opts.lookup,
  });
  // One guarded agent for webhook deliveries: scheduled ones (worker role) and redeliveries (API).
  const webhookSender = new WebhookSender({
    allowPrivate: config.mediaAllowPrivateNetworks,
    timeoutMs: config.webhookTimeoutMs,
    clock,
    lookup: opts.lookup,
    isPublic: opts.isPublic,
  });
  const remote = new RemoteWork({
    db: store.db,
    lifecycle,
    catalogue,
    config,
    clock,
    results,
    signals,
    log,
    lookup: opts.lookup,
    isPublic: opts.isPublic,
  });
  const server = buildServer({
    store,
    service,
    webhooks: new WebhookService({ store, clock, sender: webhookSender }),
    endpoints: new EndpointService({
      store,
      clock,
      signals,
      allowPrivate: config.mediaAllowPrivateNetworks,
      lookup: opts.lookup,
      secretOverlapMs: config.webhookSecretOverlapMs,
      firstDelayMs: config.webhookRetryScheduleMs[0] ?? 0,
    }),
    catalogue,
    log,
    clock,
    maxBodyBytes: config.maxBodyBytes,
    connections: config.http,
    storageHealth,
    allowPrivate: config.mediaAllowPrivateNetworks,
    webhookRetryScheduleMs: config.webhookRetryScheduleMs,
    webhookTimeoutMs: config.webhookTimeoutMs,
    metrics,
    accessLogSample: config.accessLogSample,
    rateLimits: {
      submitPerMinute: config.rateLimitSubmit,
      readPerMinute: config.rateLimitRead,
      redisUrl: config.redisUrl,
      redisPrefix: config.redisKeyPrefix,
    },
    signals,
    // A worker-only process answers /healthz, /readyz and /metrics on its PORT, nothing else.
    routes: role === 'worker' ? 'ops' : 'all',
    localResults: local ? { store: local, secret: urlSecret } : undefined,
    remote: { work: remote, maxOutputBytes: config.remote.maxOutputBytes },
    // Read at request time (the pool is made below).
    localWorkers: () =>
      workers
        ? [
            {
              id: workers.id,
              concurrency: config.workerConcurrency,
              active_jobs: workers.activeJobs,
              job_types: catalogue
                .list()
                .filter((t) => !t.remote)
                .map((t) => t.name),
            },
          ]
        : [],
  });
  const runsWorkers = role !== 'api' && config.workerConcurrency > 0;
  const workers = runsWorkers
    ? new WorkerPool({
        store,
        lifecycle,
        catalogue,
        config,
        clock,
        results,
        storageHealth,
        signals,
        log,
        lookup: opts.lookup,
        isPublic: opts.isPublic,
      })
    : undefined;
  const webhooks =
    role !== 'api'
      ? new WebhookDispatcher({
          store,
          clock,
          signals,
          log,
          sender: webhookSender,
          metrics,
          scheduleMs: config.webhookRetryScheduleMs,
          timeoutMs: config.webhookTimeoutMs,
          concurrency: config.webhookConcurrency,
          disableAfterMs: config.webhookDisableAfterMs,
        })
      : undefined;
  const housekeeping = new Housekeeping({
    store,
    config,
    clock,
    results,
    lifecycle,
    sweepStaged: () => remote.sweep(),
    log,
  });
  const pending = new Set<string>();

  return {
    config,
    store,
    server,
    service,
    lifecycle,
    workers,
    remote,
    housekeeping,
    webhooks,
    signals,
    metrics,
    log,
    // Started from the bottom up (the store and the NOTIFY bridge are already open), stopped from
    // the top down: nothing is stopped while something started after it still uses it.
    async start() {
      housekeeping.start();
      remote.start();
      workers?.start();
      webhooks?.start();
      // Every role listens: the API, or (worker role) only health, readiness and metrics.
      await server.listen({ host: config.host, port: config.port });
    },
    pendingShutdownPhases: () => [...pending],
    async stop(graceMs = 10_000) {
      // Each phase is logged, so a slow shutdown says where it waits.
      const phase = async (name: string, work: Promise<unknown> | undefined) => {
        const t0 = performance.now();
        pending.add(name);
        await work;
        pending.delete(name);
        log.debug({ phase: name, ms: Math.round(performance.now() - t0) }, 'shutdown phase done');
      };
      // Node closes idle keep-alive connections once, when close() is called; a connection busy at
      // that moment would then idle for keepAliveTimeout (72 s) and hold the close open. Sweep idle
      // connections until it is done, and cut whatever is left after the grace period.
      const sweep = setInterval(() => server.server.closeIdleConnections(), 100);
      const cut = setTimeout(() => server.server.closeAllConnections(), graceMs);
      await phase('http', server.close());
      clearInterval(sweep);
      clearTimeout(cut);
      await Promise.all([
        phase('workers', workers?.stop(graceMs)),
        phase('webhooks', webhooks?.stop(Math.min(graceMs, config.webhookTimeoutMs))),
      ]);
      await phase('webhook-sender', webhookSender.close());
      await phase('remote', remote.stop());
      await phase('housekeeping', housekeeping.stop());
      await phase('job-finishes', lifecycle.drain());
      await phase('processors', catalogue.close());
      await phase('notify', unbridge?.());
      await phase('store', store.close());
      log.info('stopped');
    },
  };
}
