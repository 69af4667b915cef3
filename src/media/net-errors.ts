/**
 * Network failures in a few client-facing words (no addresses, no stack traces), shared by media
 * downloads and webhook deliveries so both speak the same language.
 */
export function networkErrorCode(err: unknown): string | undefined {
  const e = err as { code?: unknown; cause?: { code?: unknown } } | null;
  if (typeof e?.code === 'string') return e.code;
  return typeof e?.cause?.code === 'string' ? e.cause.code : undefined;
}

/** `peer` names the other side: "server" for media hosts, "receiver" for webhooks. */
export function describeNetworkError(err: unknown, peer: 'server' | 'receiver'): string {
  const code = networkErrorCode(err);
  switch (code) {
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EAI_NONAME':
      return 'host does not resolve';
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ECONNRESET':
    case 'EPIPE':
    case 'UND_ERR_SOCKET':
    case 'UND_ERR_CLOSED':
      return `connection closed by the ${peer}`;
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'host unreachable';
    case 'UND_ERR_CONNECT_TIMEOUT':
    case 'ETIMEDOUT':
      return 'connection timed out';
    default:
      if (code && /CERT|TLS|SSL/.test(code)) return 'TLS error';
      return 'network error';
  }
}

/** 10m, 30s, 250ms: durations in messages, in the units the configuration uses. */
export function formatDuration(ms: number): string {
  if (ms >= 3_600_000 && ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}
