/**
 * An undici Agent that only ever connects to addresses the URL policy allows (`addressRule`:
 * public ones; with allowPrivate, anything but link-local and metadata addresses).
 *
 * The check sits in the connector, i.e. on the address the socket actually connects to, so DNS
 * rebinding (public at submit, private at fetch) and redirects to private hosts cannot get
 * through: the name is resolved once, every resolved address is checked, and net.connect uses
 * exactly those addresses. IP-literal hosts skip `lookup` inside net.connect, so they are checked
 * before connecting, and the connected socket's remote address is checked once more afterwards.
 *
 * Used by fetchMedia and meant to be reused by the webhook dispatcher (one Agent per process).
 */
import type { LookupAddress, LookupOptions } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { Agent, buildConnector } from 'undici';
import { addressRule, defaultLookupAll, type IsPublic, type LookupAll } from './policy.js';

/** Thrown (as the connection error) when a host is or resolves to an address the policy refuses. */
export class BlockedAddressError extends Error {
  readonly code = 'ERR_BLOCKED_ADDRESS';
  constructor(
    readonly hostname: string,
    readonly address: string,
  ) {
    super(`connection to ${hostname} refused: ${address} is not a public address`);
    this.name = 'BlockedAddressError';
  }
}

/** Thrown when a name resolves to no address at all. */
export class UnresolvableHostError extends Error {
  readonly code = 'ENOTFOUND';
  constructor(readonly hostname: string) {
    super(`${hostname} does not resolve`);
    this.name = 'UnresolvableHostError';
  }
}

export interface GuardedAgentOptions {
  allowPrivate: boolean;
  lookup?: LookupAll;
  isPublic?: IsPublic;
  /** TCP + TLS handshake limit; default 10 s. */
  connectTimeoutMs?: number;
}

/** Adapts a promise-based LookupAll to net.connect's callback `lookup`, refusing non-public answers. */
function guardedLookup(lookupAll: LookupAll, isPublic: IsPublic): LookupFunction {
  return (hostname: string, options: LookupOptions, callback) => {
    lookupAll(hostname).then(
      (found) => {
        let addresses: LookupAddress[] = found.map((a) => ({ address: a.address, family: a.family }));
        if (options.family === 4 || options.family === 6) {
          addresses = addresses.filter((a) => a.family === options.family);
        }
        if (addresses.length === 0) {
          callback(new UnresolvableHostError(hostname), '');
          return;
        }
        // All-or-nothing: a name with any non-public address is refused, whichever one
        // net.connect (or happy eyeballs) would have picked.
        const bad = addresses.find((a) => !isPublic(a.address));
        if (bad) {
          callback(new BlockedAddressError(hostname, bad.address), '');
          return;
        }
        // With autoSelectFamily (default on Node 20) net asks for all addresses.
        if (options.all) {
          callback(null, addresses);
          return;
        }
        const first = addresses[0]!;
        callback(null, first.address, first.family);
      },
      (err: unknown) => callback(err as NodeJS.ErrnoException, ''),
    );
  };
}

export function createGuardedAgent(opts: GuardedAgentOptions): Agent {
  const isPublic = addressRule(opts);
  const base = buildConnector({
    timeout: opts.connectTimeoutMs ?? 10_000,
    lookup: guardedLookup(opts.lookup ?? defaultLookupAll, isPublic),
  });

  const connect: buildConnector.connector = (options, callback) => {
    // undici passes IPv6 literals without brackets.
    if (isIP(options.hostname) !== 0 && !isPublic(options.hostname)) {
      callback(new BlockedAddressError(options.hostname, options.hostname), null);
      return;
    }
    base(options, (err, socket) => {
      if (err) {
        callback(err, null);
        return;
      }
      // Defence in depth: judge the address the socket really reached.
      const remote = socket.remoteAddress;
      if (remote === undefined || !isPublic(remote)) {
        socket.destroy();
        callback(new BlockedAddressError(options.hostname, remote ?? 'unknown'), null);
        return;
      }
      callback(null, socket);
    });
  };
  return new Agent({ connect });
}
