import { describe, expect, it } from 'vitest';
import {
  checkUrl,
  checkUrlSyntax,
  isLinkLocalOrMetadata,
  isPublicAddress,
  MAX_URL_LENGTH,
} from '../../src/media/policy.js';
import { fakeLookup } from '../helpers/servers.js';

const deny = { allowPrivate: false };
const allow = { allowPrivate: true };

describe('isPublicAddress', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback /8'],
    ['10.0.0.1', 'private 10/8'],
    ['172.16.0.1', 'private 172.16/12'],
    ['172.31.255.255', 'private 172.16/12 end'],
    ['192.168.1.1', 'private 192.168/16'],
    ['169.254.169.254', 'cloud metadata (link-local)'],
    ['169.254.0.1', 'link-local'],
    ['100.64.0.1', 'CGNAT'],
    ['100.127.255.254', 'CGNAT end'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', '0/8'],
    ['255.255.255.255', 'broadcast'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast SSDP'],
    ['240.0.0.1', 'reserved 240/4'],
    ['192.0.0.8', 'IETF protocol assignments'],
    ['192.0.2.1', 'TEST-NET-1'],
    ['198.51.100.7', 'TEST-NET-2'],
    ['203.0.113.9', 'TEST-NET-3'],
    ['198.18.0.1', 'benchmarking'],
    ['198.19.255.255', 'benchmarking end'],
    ['192.88.99.1', '6to4 relay anycast'],
    ['::', 'IPv6 unspecified'],
    ['::1', 'IPv6 loopback'],
    ['fe80::1', 'IPv6 link-local'],
    ['fe80::1%eth0', 'IPv6 link-local with zone'],
    ['fec0::1', 'IPv6 site-local'],
    ['fc00::1', 'ULA'],
    ['fd00:ec2::254', 'AWS IPv6 metadata (ULA)'],
    ['ff02::1', 'IPv6 multicast'],
    ['2001:db8::1', 'IPv6 documentation'],
    ['3fff::1', 'IPv6 documentation 3fff::/20'],
    ['2001:2::1', 'IPv6 benchmarking'],
    ['2001::1', 'Teredo'],
    ['100::1', 'discard'],
    ['::ffff:127.0.0.1', 'IPv4-mapped loopback (dotted)'],
    ['::ffff:7f00:1', 'IPv4-mapped loopback'],
    ['::ffff:a9fe:a9fe', 'IPv4-mapped metadata'],
    ['::ffff:10.0.0.1', 'IPv4-mapped private'],
    ['::7f00:1', 'IPv4-compatible loopback'],
    ['::ffff:0:7f00:1', 'IPv4-translated (RFC 6145)'],
    ['64:ff9b::7f00:1', 'NAT64 embedding loopback'],
    ['64:ff9b::a9fe:a9fe', 'NAT64 embedding metadata'],
    ['64:ff9b:1::808:808', 'local-use NAT64'],
    ['2002:7f00:1::1', '6to4 embedding loopback'],
    ['2002:a9fe:a9fe::', '6to4 embedding metadata'],
    ['5f00::1', 'SRv6 SIDs'],
    ['not-an-ip', 'garbage'],
    ['127.1', 'short IPv4 form (not canonical)'],
    ['0x7f.0.0.1', 'hex IPv4 form (not canonical)'],
    ['', 'empty'],
  ])('%s (%s) is not public', (ip) => {
    expect(isPublicAddress(ip)).toBe(false);
  });

  it.each([
    '8.8.8.8',
    '1.1.1.1',
    '93.184.215.14',
    '172.32.0.1',
    '100.128.0.1',
    '2606:4700::1111',
    '2001:4860:4860::8888',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
    '2002:808:808::1',
  ])('%s is public', (ip) => {
    expect(isPublicAddress(ip)).toBe(true);
  });
});

describe('checkUrlSyntax', () => {
  it.each([
    // loopback in every spelling the WHATWG parser normalises
    ['http://127.0.0.1/', 'host is a private address'],
    ['http://127.1/', 'host is a private address'],
    ['http://2130706433/', 'host is a private address'],
    ['http://0177.0.0.1/', 'host is a private address'],
    ['http://0x7f000001/', 'host is a private address'],
    ['http://0x7f.0.0.1/', 'host is a private address'],
    ['http://0x7f.1/', 'host is a private address'],
    ['http://127.0.0.1./', 'host is a private address'],
    ['http://%31%32%37.0.0.1/', 'host is a private address'],
    ['http://①②⑦.0.0.1/', 'host is a private address'],
    ['http://[::1]/', 'host is a private address'],
    ['http://[::ffff:127.0.0.1]/', 'host is a private address'],
    ['http://[::ffff:7f00:1]/', 'host is a private address'],
    ['http://[0:0:0:0:0:ffff:127.0.0.1]/', 'host is a private address'],
    ['http://[::127.0.0.1]/', 'host is a private address'],
    ['https://127.0.0.1:8443/x.png', 'host is a private address'],
    // private, link-local, metadata, CGNAT, unspecified, multicast, documentation
    ['http://10.0.0.1/', 'host is a private address'],
    ['http://172.16.5.4/', 'host is a private address'],
    ['http://192.168.0.1/', 'host is a private address'],
    ['http://169.254.169.254/latest/meta-data/', 'host is a private address'],
    ['http://[::ffff:169.254.169.254]/', 'host is a private address'],
    ['http://[fd00:ec2::254]/', 'host is a private address'],
    ['http://100.64.0.1/', 'host is a private address'],
    ['http://0.0.0.0/', 'host is a private address'],
    ['http://0/', 'host is a private address'],
    ['http://[::]/', 'host is a private address'],
    ['http://[fc00::1]/', 'host is a private address'],
    ['http://[fe80::1]/', 'host is a private address'],
    ['http://224.0.0.1/', 'host is a private address'],
    ['http://[ff02::1]/', 'host is a private address'],
    ['http://255.255.255.255/', 'host is a private address'],
    ['http://192.0.2.1/', 'host is a private address'],
    ['http://198.51.100.1/', 'host is a private address'],
    ['http://203.0.113.1/', 'host is a private address'],
    ['http://198.18.0.1/', 'host is a private address'],
    ['http://[2001:db8::1]/', 'host is a private address'],
    ['http://[64:ff9b::7f00:1]/', 'host is a private address'],
    ['http://[2002:7f00:1::]/', 'host is a private address'],
    // local names
    ['http://localhost/', 'host is a local name'],
    ['http://LOCALHOST:8080/', 'host is a local name'],
    ['http://localhost./', 'host is a local name'],
    ['http://api.localhost/', 'host is a local name'],
    ['http://printer.local/', 'host is a local name'],
    ['http://metadata.google.internal/computeMetadata/v1/', 'host is a local name'],
    ['http://router.home.arpa/', 'host is a local name'],
    ['http://metadata/', 'host is a local name'],
    // credentials, schemes, non-URLs
    ['http://user:pass@example.com/', 'credentials are not allowed'],
    ['http://user@example.com/', 'credentials are not allowed'],
    ['https://:secret@example.com/', 'credentials are not allowed'],
    ['file:///etc/passwd', 'scheme must be http or https'],
    ['ftp://example.com/a.png', 'scheme must be http or https'],
    ['gopher://example.com:70/_x', 'scheme must be http or https'],
    ['javascript:alert(1)', 'scheme must be http or https'],
    ['data:image/png;base64,iVBORw0KGgo=', 'scheme must be http or https'],
    ['dict://127.0.0.1:11211/', 'scheme must be http or https'],
    ['ws://example.com/', 'scheme must be http or https'],
    ['/images/a.png', 'not an absolute URL'],
    ['//example.com/a.png', 'not an absolute URL'],
    ['example.com/a.png', 'not an absolute URL'],
    ['http://', 'not an absolute URL'],
    ['http://exa mple.com/', 'not an absolute URL'],
    ['http://1.2.3.4.5/', 'not an absolute URL'],
    ['', 'empty string'],
    [' http://example.com/', 'contains whitespace or control characters'],
    ['http://example.com/\n', 'contains whitespace or control characters'],
    ['http://exam\tple.com/', 'contains whitespace or control characters'],
    ['http://127.0.0.1\u0000.example.com/', 'contains whitespace or control characters'],
    [`https://example.com/${'a'.repeat(MAX_URL_LENGTH)}`, `longer than ${MAX_URL_LENGTH} characters`],
  ])('rejects %s', (raw, reason) => {
    expect(checkUrlSyntax(raw, deny)).toEqual({ ok: false, reason });
  });

  it.each([[undefined], [null], [42], [{ href: 'https://example.com/' }], [['https://example.com/']], [true]])(
    'rejects the non-string %j',
    (raw) => {
      expect(checkUrlSyntax(raw, deny)).toEqual({ ok: false, reason: 'not a string' });
    },
  );

  it.each([
    'http://8.8.8.8/a.png',
    'https://[2606:4700::1111]/a.png',
    'https://example.com/a.png?x=1#frag',
    'HTTPS://Example.COM:8443/a%20b.png',
    'http://example.com\\@127.0.0.1/', // WHATWG: host is example.com, the rest is path
  ])('accepts %s', (raw) => {
    const r = checkUrlSyntax(raw, deny);
    expect(r.ok).toBe(true);
  });

  it('normalises the URL it returns', () => {
    const r = checkUrlSyntax('HTTPS://Example.COM/a b.png', deny);
    expect(r.ok && r.url.href).toBe('https://example.com/a%20b.png');
  });

  it('allowPrivate lifts only the address rule', () => {
    for (const raw of [
      'http://127.0.0.1:3000/x',
      'http://[::1]/',
      'http://localhost/',
      'http://10.1.2.3/',
      'http://0x7f.1/',
    ]) {
      expect(checkUrlSyntax(raw, allow).ok, raw).toBe(true);
    }
    expect(checkUrlSyntax('http://user:pass@127.0.0.1/', allow)).toEqual({
      ok: false,
      reason: 'credentials are not allowed',
    });
    expect(checkUrlSyntax('file:///etc/passwd', allow)).toEqual({ ok: false, reason: 'scheme must be http or https' });
    expect(checkUrlSyntax('gopher://127.0.0.1/', allow)).toEqual({ ok: false, reason: 'scheme must be http or https' });
    expect(checkUrlSyntax(7, allow)).toEqual({ ok: false, reason: 'not a string' });
  });

  // MEDIA_ALLOW_PRIVATE_NETWORKS=true opens loopback and private ranges, never link-local or
  // cloud-metadata ones, in any spelling the URL parser accepts.
  it.each([
    'http://169.254.169.254/latest/meta-data/',
    'http://169.254.0.1/',
    'http://169.254.255.255:8080/',
    'http://2852039166/latest/meta-data/', // decimal
    'http://0xa9fea9fe/', // hex
    'http://0xa9.0xfe.0xa9.0xfe/', // hex per octet
    'http://0251.0376.0251.0376/', // octal
    'http://169.254.43518/', // short form a.b.c16
    'http://169.16689662/', // short form a.b24
    'http://%31%36%39.254.169.254/', // percent-encoded
    'http://169.254.169.254./', // trailing dot
    'http://[::ffff:169.254.169.254]/', // IPv4-mapped
    'http://[::ffff:a9fe:a9fe]/',
    'http://[0:0:0:0:0:ffff:169.254.169.254]/',
    'http://[::169.254.169.254]/', // IPv4-compatible
    'http://[::ffff:0:a9fe:a9fe]/', // IPv4-translated
    'http://[64:ff9b::a9fe:a9fe]/', // NAT64
    'http://[2002:a9fe:a9fe::1]/', // 6to4
    'http://[fe80::1]/',
    'http://[fe80::a9fe:a9fe]/',
    'http://[febf:ffff::1]/', // end of fe80::/10
    'http://[fd00:ec2::254]/', // AWS IPv6 metadata
    'http://[FD00:EC2:0:0:0:0:0:254]/',
  ])('with allowPrivate still rejects the link-local or metadata address %s', (raw) => {
    expect(checkUrlSyntax(raw, allow)).toEqual({ ok: false, reason: 'host is a link-local or metadata address' });
  });

  it.each(['http://[fec0::1]/', 'http://[fd00:ec2::253]/', 'http://169.253.255.255/', 'http://169.255.0.1/'])(
    'with allowPrivate accepts the neighbouring non-link-local address %s',
    (raw) => {
      expect(checkUrlSyntax(raw, allow).ok).toBe(true);
    },
  );

  it('isLinkLocalOrMetadata fails closed on anything that is not an address', () => {
    for (const ip of [
      '169.254.1.1',
      'fe80::1%eth0',
      'fd00:ec2::254',
      '::ffff:169.254.1.1',
      'nonsense',
      '',
      '0xa9fea9fe',
    ])
      expect(isLinkLocalOrMetadata(ip), ip).toBe(true);
    for (const ip of ['127.0.0.1', '10.0.0.1', '::1', 'fd00::1', '8.8.8.8', '::', '0.0.0.0'])
      expect(isLinkLocalOrMetadata(ip), ip).toBe(false);
  });

  it('honours an injected isPublic', () => {
    const isPublic = (ip: string) => ip === '127.0.0.2';
    expect(checkUrlSyntax('http://127.0.0.2/', { allowPrivate: false, isPublic }).ok).toBe(true);
    expect(checkUrlSyntax('http://127.0.0.1/', { allowPrivate: false, isPublic }).ok).toBe(false);
  });
});

describe('checkUrl (with DNS, injected resolver)', () => {
  const lookup = fakeLookup({
    'cdn.example.com': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
    'internal.example.com': ['10.0.0.7'],
    'loop.example.com': ['127.0.0.1'],
    'metadata.example.com': ['169.254.169.254'],
    'v6loop.example.com': ['::1'],
    'mapped.example.com': ['::ffff:127.0.0.1'],
    'mixed.example.com': ['93.184.215.14', '192.168.1.10'],
    'nothing.example.com': [],
  });

  it('accepts a name resolving only to public addresses', async () => {
    const r = await checkUrl('https://cdn.example.com/a.png', { allowPrivate: false, lookup });
    expect(r.ok).toBe(true);
  });

  it.each([
    ['https://internal.example.com/a.png', 'host resolves to a private address'],
    ['https://loop.example.com/a.png', 'host resolves to a private address'],
    ['https://metadata.example.com/latest/meta-data/', 'host resolves to a private address'],
    ['https://v6loop.example.com/', 'host resolves to a private address'],
    ['https://mapped.example.com/', 'host resolves to a private address'],
    ['https://mixed.example.com/a.png', 'host resolves to a private address'],
    ['https://nothing.example.com/a.png', 'host does not resolve'],
    ['https://unknown.example.com/a.png', 'host does not resolve'],
  ])('rejects %s', async (raw, reason) => {
    expect(await checkUrl(raw, { allowPrivate: false, lookup })).toEqual({ ok: false, reason });
  });

  it('does not resolve IP literals, and stops at syntax errors', async () => {
    const l = fakeLookup({});
    expect((await checkUrl('http://8.8.8.8/', { allowPrivate: false, lookup: l })).ok).toBe(true);
    expect(await checkUrl('http://127.0.0.1/', { allowPrivate: false, lookup: l })).toEqual({
      ok: false,
      reason: 'host is a private address',
    });
    expect(await checkUrl('ftp://cdn.example.com/', { allowPrivate: false, lookup: l })).toEqual({
      ok: false,
      reason: 'scheme must be http or https',
    });
    expect(l.calls).toEqual([]);
  });

  it.each([
    ['metadata.example.com', ['169.254.169.254']],
    ['v6meta.example.com', ['fd00:ec2::254']],
    ['linklocal.example.com', ['fe80::1']],
    ['mappedmeta.example.com', ['::ffff:169.254.169.254']],
    ['halfmeta.example.com', ['127.0.0.1', '169.254.169.254']],
  ])('with allowPrivate still rejects %s resolving to %j', async (name, addrs) => {
    const l = fakeLookup({ [name]: addrs });
    expect(await checkUrl(`http://${name}/latest/meta-data/`, { allowPrivate: true, lookup: l })).toEqual({
      ok: false,
      reason: 'host resolves to a link-local or metadata address',
    });
  });

  it('with allowPrivate the name must still resolve, to anything but link-local', async () => {
    expect((await checkUrl('http://loop.example.com/', { allowPrivate: true, lookup })).ok).toBe(true);
    expect(await checkUrl('http://unknown.example.com/', { allowPrivate: true, lookup })).toEqual({
      ok: false,
      reason: 'host does not resolve',
    });
  });

  it('gives up on a resolver that hangs', async () => {
    const hanging = () => new Promise<never>(() => {});
    const started = Date.now();
    const r = await checkUrl('https://slow.example.com/', { allowPrivate: false, lookup: hanging, timeoutMs: 50 });
    expect(r).toEqual({ ok: false, reason: 'host lookup timed out' });
    expect(Date.now() - started).toBeLessThan(3000);
  });
});
