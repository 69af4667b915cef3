import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { systemClock, type Clock } from './clock.js';
import type { Config } from './config.js';
import { buildServer } from './http/server.js';
import { scheduleMaintenance } from './jobs/maintenance.js';
import { JobService } from './jobs/service.js';
import { createLogger } from './log.js';
import type { IsPublic, LookupAll } from './media/index.js';
import { Catalogue, defaultJobTypes } from './processors/catalogue.js';
import type { JobType } from './processors/types.js';
import { Signals } from './signals.js';
import { LocalResultStore } from './storage/local.js';
import { openStore, type Store } from './store/db.js';
import { sharedSecret } from './store/settings.js';
import { WorkerPool } from './worker/pool.js';

export type Role = 'api' | 'worker' | 'all';

export interface AppOptions {
  role?: Role;
  clock?: Clock;
  log?: Logger;
  /** Replaces the default catalogue (benchmarks register a no-op type, tests a slow one). */
  jobTypes?: JobType[];
  /** Test seams for the address rule: DNS and what counts as public. */
  lookup?: LookupAll;
  isPublic?: IsPublic;
}

export interface App {
  config: Config;
  store: Store;
  server: FastifyInstance;
  service: JobService;
  workers?: WorkerPool;
  signals: Signals;
  log: Logger;
  /** Listens on config.host:config.port (API role) and starts workers (worker role). */
  start(): Promise<void>;
  /** Graceful: stop accepting, let running jobs finish within `graceMs`, hand back the rest. */
  stop(graceMs?: number): Promise<void>;
}

/** Wires store, catalogue, service, HTTP, workers and housekeeping for one process. */
export async function createApp(config: Config, opts: AppOptions = {}): Promise<App> {
  const role = opts.role ?? 'all';
  const clock = opts.clock ?? systemClock;
  const log = opts.log ?? createLogger(config.logLevel);
  if (config.mediaAllowPrivateNetworks) {
    log.warn('MEDIA_ALLOW_PRIVATE_NETWORKS is on: media and webhook URLs may point at private and loopback addresses; never use this in production');
  }
  const store = await openStore(config.databaseUrl);
  const signals = new Signals();
  const catalogue = new Catalogue(opts.jobTypes ?? defaultJobTypes({ threads: config.workerConcurrency }));
  const urlSecret = await sharedSecret(store.db, 'result_url_secret');
  const results = new LocalResultStore(path.join(config.dataDir, 'results'), config.publicBaseUrl, urlSecret);

  const service = new JobService({ store, catalogue, config, clock, results, signals, lookup: opts.lookup });
  const server = buildServer({
    store,
    service,
    catalogue,
    log,
    clock,
    maxBodyBytes: config.maxBodyBytes,
    allowPrivate: config.mediaAllowPrivateNetworks,
    localResults: { store: results, secret: urlSecret },
  });
  const runsWorkers = role !== 'api' && config.workerConcurrency > 0;
  const workers = runsWorkers
    ? new WorkerPool({ store, catalogue, config, clock, results, signals, log, lookup: opts.lookup, isPublic: opts.isPublic })
    : undefined;
  let stopMaintenance: (() => Promise<void>) | undefined;

  return {
    config,
    store,
    server,
    service,
    workers,
    signals,
    log,
    async start() {
      if (role !== 'worker') await server.listen({ host: config.host, port: config.port });
      else await server.ready();
      workers?.start();
      stopMaintenance = scheduleMaintenance({ store, config, clock, results, signals, log });
    },
    async stop(graceMs = 10_000) {
      await server.close();
      await workers?.stop(graceMs);
      await stopMaintenance?.();
      await catalogue.close();
      await store.close();
    },
  };
}
