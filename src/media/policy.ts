/**
 * The one public-address rule of the service (docs/api.md, Media URLs), shared by media URLs
 * and webhook URLs: an absolute http(s) URL without credentials whose host is, and resolves to,
 * globally routable unicast addresses only.
 *
 * `allowPrivate` (MEDIA_ALLOW_PRIVATE_NETWORKS, for local use) opens loopback and private ranges
 * and local names, never link-local and cloud-metadata addresses: 169.254.0.0/16,
 * fe80::/10 and fd00:ec2::254 stay refused in every spelling (IPv4-mapped, NAT64, 6to4 …).
 * Schemes and credentials stay forbidden too. `addressRule` is the one predicate every check
 * (submit-time syntax and DNS, connect time, redirects) applies.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/** Resolves a host name to all of its addresses (shape of `dns.promises.lookup(host, {all:true})`). */
export type LookupAll = (hostname: string) => Promise<Array<{ address: string; family: number }>>;

export type IsPublic = (ip: string) => boolean;

export type UrlCheck = { ok: true; url: URL } | { ok: false; reason: string };

export interface UrlPolicyOptions {
  allowPrivate: boolean;
  /** Replaces `isPublicAddress` (tests use it to treat one loopback address as "public"). */
  isPublic?: IsPublic;
}

/** Reason of a link-local or metadata literal refused even with allowPrivate. */
export const REASON_LINK_LOCAL = 'host is a link-local or metadata address';

/**
 * Longer URLs are refused before parsing (presigned S3/GCS URLs stay below this); the submit and
 * webhook-endpoint schemas use it too, so one limit is published and enforced.
 */
export const MAX_URL_LENGTH = 4096;
export const DNS_TIMEOUT_MS = 5000;

/** Reasons complete "input.source: must be a public http or https URL (REASON)". */
export const REASON_PRIVATE = 'host is a private address';
export const REASON_RESOLVES_PRIVATE = 'host resolves to a private address';
export const REASON_RESOLVES_LINK_LOCAL = 'host resolves to a link-local or metadata address';

export const defaultLookupAll: LookupAll = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

// 2000::/3 is the only block IANA has allocated for global unicast; everything outside it
// (ULA fc00::/7 incl. fd00:ec2::254, link-local, site-local, multicast, ::/8 incl. the deprecated
// IPv4-compatible ::a.b.c.d, 100::/64 discard, 5f00::/16 …) is not public.
const GLOBAL_UNICAST_V6 = ipaddr.IPv6.parse('2000::');
const NAT64_WELL_KNOWN = ipaddr.IPv6.parse('64:ff9b::');

function isPublicV4(addr: ipaddr.IPv4): boolean {
  // ipaddr.js names every special-purpose block (private, loopback, linkLocal incl. 169.254.169.254,
  // carrierGradeNat, multicast, broadcast, unspecified 0/8, reserved incl. documentation 192.0.2/24,
  // 198.51.100/24, 203.0.113/24, benchmarking 198.18/15, 240/4, 192.0.0/24, 192.88.99/24 …).
  // Only the leftover 'unicast' is public; anycast services (as112, amt) are refused too: fail closed.
  return addr.range() === 'unicast';
}

function v4FromWords(hi: number, lo: number): ipaddr.IPv4 {
  return new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
}

function isPublicV6(addr: ipaddr.IPv6): boolean {
  const p = addr.parts;
  // Forms that carry an IPv4 address and can reach it: judge the embedded IPv4.
  if (addr.isIPv4MappedAddress()) return isPublicV4(addr.toIPv4Address()); // ::ffff:a.b.c.d
  if (addr.match(NAT64_WELL_KNOWN, 96)) return isPublicV4(v4FromWords(p[6]!, p[7]!)); // 64:ff9b::a.b.c.d
  if (p[0] === 0x2002) return isPublicV4(v4FromWords(p[1]!, p[2]!)); // 6to4 2002:AABB:CCDD::/48
  if (!addr.match(GLOBAL_UNICAST_V6, 3)) return false;
  // Inside 2000::/3 ipaddr.js names the non-global blocks: teredo 2001::/32 (its IPv4 is
  // obfuscated; refused), 2001::/23 protocol assignments, benchmarking, orchid, documentation
  // 2001:db8::/32 and 3fff::/20, as112v6, amt.
  return addr.range() === 'unicast';
}

/**
 * True only for a globally routable unicast address. Anything that is not a valid IP address
 * (including zone-scoped IPv6 link-local) is not public.
 */
export function isPublicAddress(ip: string): boolean {
  // net.isIP accepts only canonical dotted-quad / RFC 4291 text, never "127.1" or "0x7f.1" forms.
  const family = isIP(ip);
  if (family === 0) return false;
  try {
    const addr = ipaddr.parse(ip);
    return addr.kind() === 'ipv4' ? isPublicV4(addr as ipaddr.IPv4) : isPublicV6(addr as ipaddr.IPv6);
  } catch {
    return false;
  }
}

const LINK_LOCAL_V4 = ipaddr.IPv4.parse('169.254.0.0');
const LINK_LOCAL_V6 = ipaddr.IPv6.parse('fe80::');
const AWS_METADATA_V6 = ipaddr.IPv6.parse('fd00:ec2::254');

/** The IPv4 address an IPv6 address carries and can reach (mapped, translated, compatible, NAT64, 6to4). */
function embeddedV4(addr: ipaddr.IPv6): ipaddr.IPv4 | undefined {
  const p = addr.parts;
  if (addr.isIPv4MappedAddress()) return addr.toIPv4Address(); // ::ffff:a.b.c.d
  if (p[0] === 0x2002) return v4FromWords(p[1]!, p[2]!); // 6to4
  if (addr.match(NAT64_WELL_KNOWN, 96)) return v4FromWords(p[6]!, p[7]!); // 64:ff9b::a.b.c.d
  // ::a.b.c.d (IPv4-compatible) and ::ffff:0:a.b.c.d (IPv4-translated)
  if (p.slice(0, 4).every((w) => w === 0) && p[5] === 0 && (p[4] === 0 || p[4] === 0xffff))
    return v4FromWords(p[6]!, p[7]!);
  return undefined;
}

/**
 * Link-local and cloud-metadata addresses (169.254.0.0/16, fe80::/10, fd00:ec2::254, and an IPv6
 * address carrying a link-local IPv4): refused whatever MEDIA_ALLOW_PRIVATE_NETWORKS says. Anything
 * that is not a valid address counts as one (fail closed).
 */
export function isLinkLocalOrMetadata(ip: string): boolean {
  if (isIP(ip) === 0) return true;
  try {
    const addr = ipaddr.parse(ip);
    if (addr.kind() === 'ipv4') return (addr as ipaddr.IPv4).match(LINK_LOCAL_V4, 16);
    const v6 = addr as ipaddr.IPv6;
    const v4 = embeddedV4(v6);
    if (v4) return v4.match(LINK_LOCAL_V4, 16);
    return v6.match(LINK_LOCAL_V6, 10) || v6.match(AWS_METADATA_V6, 128);
  } catch {
    return true;
  }
}

/**
 * The addresses a fetch or delivery may connect to: public ones only, or with allowPrivate every
 * address but link-local and metadata ones. The one predicate of submit-time, connect-time and
 * redirect checks.
 */
export function addressRule(opts: UrlPolicyOptions): IsPublic {
  return opts.allowPrivate ? (ip) => !isLinkLocalOrMetadata(ip) : (opts.isPublic ?? isPublicAddress);
}

/** URL.hostname of an IPv6 literal keeps its brackets. */
function bareHost(hostname: string): string {
  return hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
}

/** The IP address a URL's host names literally, or undefined when the host is a DNS name. */
export function ipLiteralOf(url: URL): string | undefined {
  const host = bareHost(url.hostname);
  return isIP(host) !== 0 ? host : undefined;
}

const LOCAL_SUFFIXES = ['localhost', 'local', 'internal', 'localdomain', 'home.arpa', 'lan'];

/**
 * Names that only mean something inside a network. Single-label names ("metadata", "intranet")
 * are refused as well: they resolve through search domains, never publicly.
 */
function isLocalName(hostname: string): boolean {
  const name = hostname.replace(/\.$/, '');
  if (!name.includes('.')) return true;
  return LOCAL_SUFFIXES.some((s) => name === s || name.endsWith(`.${s}`));
}

/** Everything that can be decided without DNS. */
export function checkUrlSyntax(raw: unknown, opts: UrlPolicyOptions): UrlCheck {
  if (typeof raw !== 'string') return { ok: false, reason: 'not a string' };
  if (raw.length === 0) return { ok: false, reason: 'empty string' };
  if (raw.length > MAX_URL_LENGTH) {
    return { ok: false, reason: `longer than ${MAX_URL_LENGTH} characters` };
  }
  // The URL parser silently strips edge whitespace and inner tabs/newlines; refuse them instead
  // so what the client sent is what is fetched.
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(raw) || raw.trim() !== raw) {
    return { ok: false, reason: 'contains whitespace or control characters' };
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'not an absolute URL' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return { ok: false, reason: 'scheme must be http or https' };
  }
  if (url.username !== '' || url.password !== '') {
    return { ok: false, reason: 'credentials are not allowed' };
  }
  if (url.hostname === '') return { ok: false, reason: 'host is missing' };

  // WHATWG parsing has already normalised 2130706433, 0177.0.0.1, 0xa9fea9fe … to dotted quads
  // and IPv6 literals to their compressed form, so a literal is judged as an address here.
  const literal = ipLiteralOf(url);
  if (literal !== undefined) {
    if (addressRule(opts)(literal)) return { ok: true, url };
    return { ok: false, reason: opts.allowPrivate ? REASON_LINK_LOCAL : REASON_PRIVATE };
  }
  if (opts.allowPrivate) return { ok: true, url };
  if (isLocalName(url.hostname)) return { ok: false, reason: 'host is a local name' };
  return { ok: true, url };
}

/**
 * Submit-time check: the syntax rule plus DNS. A name must resolve, and every address it resolves
 * to must pass `addressRule` (public; with allowPrivate, not link-local or metadata). Fetching re-checks the address actually
 * connected to (see guarded-agent.ts), so this is not the only line of defence.
 */
export async function checkUrl(
  raw: unknown,
  opts: UrlPolicyOptions & { lookup?: LookupAll; timeoutMs?: number },
): Promise<UrlCheck> {
  const syntax = checkUrlSyntax(raw, opts);
  if (!syntax.ok) return syntax;
  const { url } = syntax;
  if (ipLiteralOf(url) !== undefined) return syntax;

  const lookup = opts.lookup ?? defaultLookupAll;
  const timeoutMs = opts.timeoutMs ?? DNS_TIMEOUT_MS;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  let addresses: Array<{ address: string }>;
  try {
    const result = await Promise.race([lookup(url.hostname), timeout]);
    if (result === 'timeout') return { ok: false, reason: 'host lookup timed out' };
    addresses = result;
  } catch {
    return { ok: false, reason: 'host does not resolve' };
  } finally {
    clearTimeout(timer);
  }
  if (addresses.length === 0) return { ok: false, reason: 'host does not resolve' };
  const allowed = addressRule(opts);
  if (!addresses.every((a) => allowed(a.address))) {
    return { ok: false, reason: opts.allowPrivate ? REASON_RESOLVES_LINK_LOCAL : REASON_RESOLVES_PRIVATE };
  }
  return syntax;
}
