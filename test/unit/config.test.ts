import { describe, expect, it } from 'vitest';
import { loadConfig, parseDuration } from '../../src/config.js';

describe('configuration', () => {
  it('parses durations with ms, s, m, h and d', () => {
    expect(parseDuration('250ms')).toBe(250);
    expect(parseDuration('10s')).toBe(10_000);
    expect(parseDuration('1.5m')).toBe(90_000);
    expect(parseDuration('6h')).toBe(21_600_000);
    expect(parseDuration('7d')).toBe(604_800_000);
    expect(parseDuration('1500')).toBe(1500);
    expect(() => parseDuration('soon')).toThrow('"soon" is not a duration');
  });

  it('has the documented defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      port: 8080,
      host: '0.0.0.0',
      publicBaseUrl: 'http://localhost:8080',
      resultUrlTtlMs: 3_600_000,
      resultRetentionMs: 7 * 86_400_000,
      idempotencyTtlMs: 86_400_000,
      webhookRetryScheduleMs: [0, 60_000, 300_000, 1_800_000, 21_600_000],
      webhookTimeoutMs: 10_000,
      mediaAllowPrivateNetworks: false,
      maxMediaBytes: 100 * 1024 * 1024,
      http: { headersTimeoutMs: 10_000, requestTimeoutMs: 120_000, maxConnections: 10_000 },
    });
    expect(c.databaseUrl).toMatch(/^sqlite:.*data\/media-jobs\.sqlite$/);
  });

  it.each([
    [{ PORT: 'eighty' }, /^invalid configuration: PORT: /],
    [{ PORT: '70000' }, /^invalid configuration: PORT: /],
    [{ JOB_TIMEOUT: '5 minutes' }, /^invalid configuration: JOB_TIMEOUT: "5 minutes" is not a duration/],
    [{ WEBHOOK_RETRY_SCHEDULE: '0,1m,often' }, /^invalid configuration: WEBHOOK_RETRY_SCHEDULE: /],
    [{ MEDIA_ALLOW_PRIVATE_NETWORKS: 'maybe' }, /^invalid configuration: MEDIA_ALLOW_PRIVATE_NETWORKS: /],
    [{ PUBLIC_BASE_URL: 'ftp://x' }, /^invalid configuration: PUBLIC_BASE_URL: /],
    [{ JOB_LEASE: '100ms' }, /^invalid configuration: JOB_LEASE must be at least 1s/],
    [{ HTTP_HEADERS_TIMEOUT: '3m' }, /^invalid configuration: HTTP_HEADERS_TIMEOUT must be at least 100ms and at most/],
    [{ HTTP_HEADERS_TIMEOUT: '0' }, /^invalid configuration: HTTP_HEADERS_TIMEOUT must be at least 100ms/],
    [{ HTTP_MAX_CONNECTIONS: '-1' }, /^invalid configuration: HTTP_MAX_CONNECTIONS: /],
  ])('rejects %j with one clear line', (env, message) => {
    expect(() => loadConfig(env)).toThrow(message);
  });
});
