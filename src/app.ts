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

/** What the steps of createApp build and pass on. */
interface Core {
  config: Config;
  opts: AppOptions;
  role: Role;
  clock: Clock;
  log: Logger;
  store: Store;
  signals: Signals;
  unbridge: (() => Promise<void>) | undefined;
  catalogue: Catalogue;
  results: ResultStore;
  /** The local result store and its URL secret (downloads on signed URLs), when results are local. */
  local: { store: LocalResultStore; secret: string } | undefined;
}

interface Parts extends Core {
  storageHealth: StorageHealth;
  metrics: Metrics;
  lifecycle: JobLifecycle;
  service: JobService;
  webhookSender: WebhookSender;
  remote: RemoteWork;
}

interface Background {
  workers: WorkerPool | undefined;
  webhooks: WebhookDispatcher | undefined;
  housekeeping: Housekeeping;
}

/** Wires store, catalogue, service, HTTP, workers and housekeeping for one process. */
export async function createApp(config: Config, opts: AppOptions = {}): Promise<App> {
  const core = await openCore(config, opts);
  const parts = services(core);
  const background = backgroundWork(parts);
  const server = httpServer(parts, () => background.workers);
  const { store, signals, metrics, log, service, lifecycle, remote } = parts;
  return {
    config,
    store,
    server,
    service,
    lifecycle,
    remote,
    signals,
    metrics,
    log,
    ...background,
    ...startAndStop(parts, background, server),
  };
}

/** The log, the store (migrated), the cross-process signals, the catalogue and the result store. */
async function openCore(config: Config, opts: AppOptions): Promise<Core> {
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
  const { results, local } = await openResults(config, store, clock, opts);
  return { config, opts, role: opts.role ?? 'all', clock, log, store, signals, unbridge, catalogue, results, local };
}

async function openResults(
  config: Config,
  store: Store,
  clock: Clock,
  opts: AppOptions,
): Promise<Pick<Core, 'results' | 'local'>> {
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
  return { results, local: local ? { store: local, secret: urlSecret } : undefined };
}

/** The job service on the one write path, the webhook sender and the remote worker protocol. */
function services(core: Core): Parts {
  const { config, opts, clock, log, store, signals, catalogue, results } = core;
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
  const storageHealth = new StorageHealth(results, log);
  return { ...core, storageHealth, metrics, lifecycle, service, webhookSender, remote };
}

/** The Fastify server; `workers` is read at request time (the admin view of this process's pool). */
function httpServer(parts: Parts, workers: () => WorkerPool | undefined): FastifyInstance {
  const { config, opts, clock, log, store, signals, catalogue, service, metrics, remote } = parts;
  return buildServer({
    store,
    service,
    webhooks: new WebhookService({ store, clock, sender: parts.webhookSender }),
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
    storageHealth: parts.storageHealth,
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
    routes: parts.role === 'worker' ? 'ops' : 'all',
    localResults: parts.local,
    remote: { work: remote, maxOutputBytes: config.remote.maxOutputBytes },
    localWorkers: () => {
      const pool = workers();
      if (!pool) return [];
      const jobTypes = catalogue
        .list()
        .filter((t) => !t.remote)
        .map((t) => t.name);
      return [
        { id: pool.id, concurrency: config.workerConcurrency, active_jobs: pool.activeJobs, job_types: jobTypes },
      ];
    },
  });
}

/** The worker pool and the webhook dispatcher (not in an API-only process), and housekeeping (every role). */
function backgroundWork(parts: Parts): Background {
  const { config, opts, role, clock, log, store, signals, catalogue, results, lifecycle, metrics, remote } = parts;
  const runsWorkers = role !== 'api' && config.workerConcurrency > 0;
  const workers = runsWorkers
    ? new WorkerPool({
        store,
        lifecycle,
        catalogue,
        config,
        clock,
        results,
        storageHealth: parts.storageHealth,
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
          sender: parts.webhookSender,
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
  return { workers, webhooks, housekeeping };
}

/**
 * Warms the job types in the background (the first face swap of a cold process would otherwise
 * start its threads, load the models and run the swap's code unoptimised: seconds, not 0.5 s). A job
 * claimed meanwhile waits in its type's thread queue behind the warm-up, as it would have waited for
 * the same work anyway.
 */
async function warmJobTypes({ catalogue, log }: Parts, stopped: AbortSignal): Promise<void> {
  const t0 = performance.now();
  const warmed = await catalogue.warmup();
  if (stopped.aborted) return; // stopped meanwhile: the threads were closed under it
  for (const w of warmed)
    if (w.error)
      log.warn({ err: w.error, job_type: w.type }, 'job type warm-up failed; its first job pays the start-up');
  const ms = Object.fromEntries(warmed.filter((w) => !w.error).map((w) => [w.type, w.ms]));
  if (warmed.length) log.info({ ms, total_ms: Math.round(performance.now() - t0) }, 'job types warmed');
}

/**
 * Started from the bottom up (the store and the NOTIFY bridge are already open), stopped from
 * the top down: nothing is stopped while something started after it still uses it.
 */
function startAndStop(
  parts: Parts,
  { workers, webhooks, housekeeping }: Background,
  server: FastifyInstance,
): Pick<App, 'start' | 'stop' | 'pendingShutdownPhases'> {
  const { config, log, remote } = parts;
  const pending = new Set<string>();
  const stopped = new AbortController();
  // Each phase is logged, so a slow shutdown says where it waits.
  const phase = async (name: string, work: Promise<unknown> | undefined) => {
    const t0 = performance.now();
    pending.add(name);
    await work;
    pending.delete(name);
    log.debug({ phase: name, ms: Math.round(performance.now() - t0) }, 'shutdown phase done');
  };
  return {
    async start() {
      housekeeping.start();
      remote.start();
      workers?.start();
      if (workers && config.workerWarmup) void warmJobTypes(parts, stopped.signal);
      webhooks?.start();
      // Every role listens: the API, or (worker role) only health, readiness and metrics.
      await server.listen({ host: config.host, port: config.port });
    },
    pendingShutdownPhases: () => [...pending],
    async stop(graceMs = 10_000) {
      stopped.abort();
      await phase('http', closeServer(server, graceMs));
      await Promise.all([
        phase('workers', workers?.stop(graceMs)),
        phase('webhooks', webhooks?.stop(Math.min(graceMs, config.webhookTimeoutMs))),
      ]);
      await phase('webhook-sender', parts.webhookSender.close());
      await phase('remote', remote.stop());
      await phase('housekeeping', housekeeping.stop());
      await phase('job-finishes', parts.lifecycle.drain());
      await phase('processors', parts.catalogue.close());
      await phase('notify', parts.unbridge?.());
      await phase('store', parts.store.close());
      log.info('stopped');
    },
  };
}

/**
 * Node closes idle keep-alive connections once, when close() is called; a connection busy at
 * that moment would then idle for keepAliveTimeout (72 s) and hold the close open. Sweep idle
 * connections until it is done, and cut whatever is left after the grace period.
 */
async function closeServer(server: FastifyInstance, graceMs: number): Promise<void> {
  const sweep = setInterval(() => server.server.closeIdleConnections(), 100);
  const cut = setTimeout(() => server.server.closeAllConnections(), graceMs);
  try {
    await server.close();
  } finally {
    clearInterval(sweep);
    clearTimeout(cut);
  }
}
