import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { parseS3Url } from './storage/s3-url.js';

/** Parses `250ms`, `10s`, `5m`, `6h`, `7d` or a bare number of milliseconds. */
export function parseDuration(raw: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(raw);
  if (!m) throw new Error(`"${raw}" is not a duration (use e.g. 500ms, 10s, 5m, 6h, 7d)`);
  const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[(m[2] ?? 'ms') as 'ms'];
  return Math.round(Number(m[1]) * unit);
}

const duration = (fallback: string) =>
  z
    .string()
    .default(fallback)
    .transform((v, ctx) => {
      try {
        return parseDuration(v);
      } catch (e) {
        ctx.addIssue({ code: 'custom', message: (e as Error).message });
        return z.NEVER;
      }
    });

const int = (fallback: number, min = 0) => z.coerce.number().int().min(min).default(fallback);
const bool = (fallback: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'])
    .default(fallback ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1' || v === 'yes');

const envSchema = z.object({
  PORT: int(8080).pipe(z.number().max(65535)),
  HOST: z.string().default('0.0.0.0'),
  DATA_DIR: z.string().default('./data'),
  DATABASE_URL: z.string().optional(),
  DATABASE_POOL_SIZE: int(10, 1),
  DATABASE_CONNECT_TIMEOUT: duration('5s'),
  DATABASE_QUERY_TIMEOUT: duration('30s'),
  PUBLIC_BASE_URL: z.url({ protocol: /^https?$/ }).optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  ACCESS_LOG_SAMPLE: z.coerce.number().min(0).max(1).default(1),
  WORKER_CONCURRENCY: int(Math.max(1, Math.min(4, os.availableParallelism())), 0),
  WORKER_WARMUP: bool(true),
  JOB_TIMEOUT: duration('10m'),
  JOB_LEASE: duration('30s'),
  JOB_MAX_ATTEMPTS: int(3, 1),
  OWNER_MAX_RUNNING: int(0, 0),
  QUEUE_POLL_INTERVAL: duration('1s'),
  MAX_MEDIA_BYTES: int(100 * 1024 * 1024, 1),
  MEDIA_FETCH_TIMEOUT: duration('60s'),
  MEDIA_ALLOW_PRIVATE_NETWORKS: bool(false),
  MAX_BODY_BYTES: int(1024 * 1024, 1024),
  HTTP_HEADERS_TIMEOUT: duration('10s'),
  HTTP_REQUEST_TIMEOUT: duration('2m'),
  HTTP_MAX_CONNECTIONS: int(10_000, 0),
  RESULT_URL_TTL: duration('1h'),
  RESULT_RETENTION: duration('7d'),
  IDEMPOTENCY_TTL: duration('24h'),
  WEBHOOK_RETRY_SCHEDULE: z.string().default('0,1m,5m,30m,6h'),
  WEBHOOK_TIMEOUT: duration('10s'),
  WEBHOOK_CONCURRENCY: int(64, 1),
  WEBHOOK_SECRET_OVERLAP: duration('24h'),
  WEBHOOK_DISABLE_AFTER: duration('5d'),
  MAINTENANCE_INTERVAL: duration('1m'),
  SHUTDOWN_GRACE: duration('20s'),
  RESULT_STORE: z.string().default('local'),
  RATE_LIMIT_SUBMIT: int(600, 0),
  MAX_BATCH_ITEMS: int(1000, 1),
  RATE_LIMIT_READ: int(3000, 0),
  REDIS_URL: z.url({ protocol: /^rediss?$/ }).optional(),
  REDIS_KEY_PREFIX: z.string().default('media-jobs:rate:'),
  S3_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
  S3_REGION: z.string().default('us-east-1'),
  S3_FORCE_PATH_STYLE: bool(true),
  MAX_VIDEO_SECONDS: z.coerce.number().positive().default(120),
  MAX_VIDEO_PIXELS: int(1920 * 1080, 1),
  FFMPEG_PATH: z.string().optional(),
  FFPROBE_PATH: z.string().optional(),
  JOB_TYPES_FILE: z.string().optional(),
  WORKER_MEDIA_URL_TTL: duration('1h'),
  WORKER_MAX_OUTPUT_BYTES: int(200 * 1024 * 1024, 1),
});

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  /** `sqlite:<file>` when DATABASE_URL is unset, else the PostgreSQL URL. */
  databaseUrl: string;
  /** PostgreSQL connections per process (plus one for LISTEN). */
  databasePoolSize: number;
  /** PostgreSQL: bound on opening (or waiting for) a connection; past it the request answers 503. */
  databaseConnectTimeoutMs: number;
  /** PostgreSQL: a query unanswered this long drops its connection (a blackholed peer); 0 turns it off. */
  databaseQueryTimeoutMs: number;
  publicBaseUrl: string;
  logLevel: z.infer<typeof envSchema>['LOG_LEVEL'];
  /** The share of successful requests that get an access log line at info (4xx and 5xx always do). */
  accessLogSample: number;
  workerConcurrency: number;
  /** A worker process warms its job types at start (threads started, models loaded). */
  workerWarmup: boolean;
  jobTimeoutMs: number;
  jobLeaseMs: number;
  jobMaxAttempts: number;
  /** Jobs of one owner running at once, across all workers (0: no limit). */
  ownerMaxRunning: number;
  queuePollIntervalMs: number;
  maxMediaBytes: number;
  mediaFetchTimeoutMs: number;
  mediaAllowPrivateNetworks: boolean;
  maxBodyBytes: number;
  /** Slow clients: a request's headers, and the whole request, must arrive within these; open connections at most (0: no limit). */
  http: { headersTimeoutMs: number; requestTimeoutMs: number; maxConnections: number };
  resultUrlTtlMs: number;
  resultRetentionMs: number;
  idempotencyTtlMs: number;
  /** Delay before each webhook attempt; the first is normally 0. */
  webhookRetryScheduleMs: number[];
  webhookTimeoutMs: number;
  webhookConcurrency: number;
  /** After a rotation, the old endpoint secret still signs (a second signature) this long. */
  webhookSecretOverlapMs: number;
  /** An owner endpoint whose attempts have all failed this long is disabled. */
  webhookDisableAfterMs: number;
  maintenanceIntervalMs: number;
  /** On SIGTERM, how long running jobs may take to finish before they are handed back. */
  shutdownGraceMs: number;
  /** Most items of POST /jobs/batch. */
  maxBatchItems: number;
  /** Requests per minute per API key (0: unlimited): submits, and every other API request. */
  rateLimitSubmit: number;
  rateLimitRead: number;
  /** Where rate-limit counters are shared between API processes; unset: each process counts alone. */
  redisUrl?: string;
  redisKeyPrefix: string;
  /** `local` (files under DATA_DIR, served by this service) or an S3-compatible bucket. */
  resultStore:
    | { kind: 'local' }
    | { kind: 's3'; bucket: string; prefix: string; endpoint?: string; region: string; forcePathStyle: boolean };
  /** Video jobs: longest and largest accepted input, and ffmpeg/ffprobe (unset: the npm-shipped builds). */
  video: { maxSeconds: number; maxPixels: number; ffmpegPath?: string | undefined; ffprobePath?: string | undefined };
  /** Remote workers: the declared job types' file, the life of staged input URLs, the output size limit. */
  remote: { jobTypesFile?: string | undefined; mediaUrlTtlMs: number; maxOutputBytes: number };
}

/** Every environment variable the service reads (deployment files are checked against it). */
export const CONFIG_VARIABLES: readonly string[] = Object.keys(envSchema.shape);

export class ConfigError extends Error {}

type Env = z.infer<typeof envSchema>;

/** Reads and validates the environment; throws ConfigError with one clear line. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const e = parseEnv(env);
  const schedule = retrySchedule(e.WEBHOOK_RETRY_SCHEDULE);
  checkTimes(e);
  return toConfig(e, schedule, resultStoreOf(e));
}

function parseEnv(env: NodeJS.ProcessEnv): Env {
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = envSchema.safeParse(cleaned);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError(`invalid configuration: ${issue.path.join('.')}: ${issue.message}`);
  }
  return parsed.data;
}

function retrySchedule(text: string): number[] {
  let schedule: number[];
  try {
    schedule = text.split(',').map(parseDuration);
  } catch (err) {
    throw new ConfigError(`invalid configuration: WEBHOOK_RETRY_SCHEDULE: ${(err as Error).message}`);
  }
  if (schedule.length === 0) throw new ConfigError('invalid configuration: WEBHOOK_RETRY_SCHEDULE is empty');
  return schedule;
}

/** The rules between variables that the schema cannot state one variable at a time. */
function checkTimes(e: Env): void {
  if (e.JOB_LEASE < 1000) throw new ConfigError('invalid configuration: JOB_LEASE must be at least 1s');
  if (e.HTTP_HEADERS_TIMEOUT < 100 || e.HTTP_HEADERS_TIMEOUT > e.HTTP_REQUEST_TIMEOUT)
    throw new ConfigError(
      'invalid configuration: HTTP_HEADERS_TIMEOUT must be at least 100ms and at most HTTP_REQUEST_TIMEOUT',
    );
}

function resultStoreOf(e: Env): Config['resultStore'] {
  if (e.RESULT_STORE === 'local') return { kind: 'local' };
  try {
    return {
      kind: 's3',
      ...parseS3Url(e.RESULT_STORE),
      endpoint: e.S3_ENDPOINT,
      region: e.S3_REGION,
      forcePathStyle: e.S3_FORCE_PATH_STYLE,
    };
  } catch (err) {
    throw new ConfigError(`invalid configuration: ${(err as Error).message}`);
  }
}

function toConfig(e: Env, schedule: number[], resultStore: Config['resultStore']): Config {
  const dataDir = path.resolve(e.DATA_DIR);
  return {
    port: e.PORT,
    host: e.HOST,
    dataDir,
    databaseUrl: e.DATABASE_URL ?? `sqlite:${path.join(dataDir, 'media-jobs.sqlite')}`,
    databasePoolSize: e.DATABASE_POOL_SIZE,
    databaseConnectTimeoutMs: e.DATABASE_CONNECT_TIMEOUT,
    databaseQueryTimeoutMs: e.DATABASE_QUERY_TIMEOUT,
    publicBaseUrl: (e.PUBLIC_BASE_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, ''),
    logLevel: e.LOG_LEVEL,
    accessLogSample: e.ACCESS_LOG_SAMPLE,
    workerConcurrency: e.WORKER_CONCURRENCY,
    workerWarmup: e.WORKER_WARMUP,
    jobTimeoutMs: e.JOB_TIMEOUT,
    jobLeaseMs: e.JOB_LEASE,
    jobMaxAttempts: e.JOB_MAX_ATTEMPTS,
    ownerMaxRunning: e.OWNER_MAX_RUNNING,
    queuePollIntervalMs: e.QUEUE_POLL_INTERVAL,
    maxMediaBytes: e.MAX_MEDIA_BYTES,
    mediaFetchTimeoutMs: e.MEDIA_FETCH_TIMEOUT,
    mediaAllowPrivateNetworks: e.MEDIA_ALLOW_PRIVATE_NETWORKS,
    maxBodyBytes: e.MAX_BODY_BYTES,
    http: {
      headersTimeoutMs: e.HTTP_HEADERS_TIMEOUT,
      requestTimeoutMs: e.HTTP_REQUEST_TIMEOUT,
      maxConnections: e.HTTP_MAX_CONNECTIONS,
    },
    resultUrlTtlMs: e.RESULT_URL_TTL,
    resultRetentionMs: e.RESULT_RETENTION,
    idempotencyTtlMs: e.IDEMPOTENCY_TTL,
    webhookRetryScheduleMs: schedule,
    webhookTimeoutMs: e.WEBHOOK_TIMEOUT,
    webhookConcurrency: e.WEBHOOK_CONCURRENCY,
    webhookSecretOverlapMs: e.WEBHOOK_SECRET_OVERLAP,
    webhookDisableAfterMs: e.WEBHOOK_DISABLE_AFTER,
    maintenanceIntervalMs: e.MAINTENANCE_INTERVAL,
    shutdownGraceMs: e.SHUTDOWN_GRACE,
    resultStore,
    rateLimitSubmit: e.RATE_LIMIT_SUBMIT,
    maxBatchItems: e.MAX_BATCH_ITEMS,
    rateLimitRead: e.RATE_LIMIT_READ,
    video: {
      maxSeconds: e.MAX_VIDEO_SECONDS,
      maxPixels: e.MAX_VIDEO_PIXELS,
      ffmpegPath: e.FFMPEG_PATH,
      ffprobePath: e.FFPROBE_PATH,
    },
    redisUrl: e.REDIS_URL,
    redisKeyPrefix: e.REDIS_KEY_PREFIX,
    remote: {
      jobTypesFile: e.JOB_TYPES_FILE,
      mediaUrlTtlMs: e.WORKER_MEDIA_URL_TTL,
      maxOutputBytes: e.WORKER_MAX_OUTPUT_BYTES,
    },
  };
}
