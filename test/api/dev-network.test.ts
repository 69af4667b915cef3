import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakeLookup, startServer, type TestServer } from '../helpers/servers.js';
import { startService, waitTerminal, type TestService } from '../helpers/service.js';

// MEDIA_ALLOW_PRIVATE_NETWORKS=true (the README's walk-through) opens loopback and private ranges,
// never link-local and cloud-metadata addresses: at submit, at connect, on redirects.
const lookup = fakeLookup({
  'metadata.example.com': ['169.254.169.254'],
  'v6meta.example.com': ['fd00:ec2::254'],
  'media.example.com': ['127.0.0.1'],
});

let svc: TestService;
let media: TestServer;
beforeAll(async () => {
  media = await startServer((req, res) => {
    // A loopback server (allowed in this mode) that sends the fetch on to the metadata address.
    if (req.url === '/to-metadata') res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
    else if (req.url === '/to-metadata-hex') res.writeHead(302, { location: 'http://0xa9fea9fe/latest/' }).end();
    else res.writeHead(404).end();
  });
  svc = await startService({ MEDIA_ALLOW_PRIVATE_NETWORKS: 'true', WORKER_CONCURRENCY: '1' }, { lookup });
});
afterAll(async () => {
  await svc?.stop();
  await media?.close();
});

const transform = (source: string, webhook?: string) => ({
  job_type: 'image-transform',
  model: 'nearest',
  input: { source, width: 16, format: 'png' },
  ...(webhook ? { webhook: { url: webhook } } : {}),
});
const submit = (body: unknown) => svc.call('POST', '/api/v1/jobs/submit/image-transform', { body });

describe('MEDIA_ALLOW_PRIVATE_NETWORKS=true keeps link-local and metadata addresses out', () => {
  it.each([
    ['http://169.254.169.254/latest/meta-data/', 'host is a link-local or metadata address'],
    ['http://2852039166/latest/meta-data/', 'host is a link-local or metadata address'],
    ['http://0xa9fea9fe/', 'host is a link-local or metadata address'],
    ['http://0251.0376.0251.0376/', 'host is a link-local or metadata address'],
    ['http://[::ffff:169.254.169.254]/', 'host is a link-local or metadata address'],
    ['http://[64:ff9b::a9fe:a9fe]/', 'host is a link-local or metadata address'],
    ['http://[fe80::1]/', 'host is a link-local or metadata address'],
    ['http://[fd00:ec2::254]/latest/meta-data/', 'host is a link-local or metadata address'],
    ['http://metadata.example.com/latest/meta-data/', 'host resolves to a link-local or metadata address'],
    ['http://v6meta.example.com/', 'host resolves to a link-local or metadata address'],
  ])('refuses the media URL %s at submit', async (url, reason) => {
    const r = await submit(transform(url));
    expect(r.status).toBe(400);
    expect(r.body.message).toBe(`input.source: must be a public http or https URL (${reason})`);
  });

  it('refuses a webhook URL on the metadata address', async () => {
    const r = await submit(transform(`${media.origin}/x.png`, 'http://169.254.169.254/hook'));
    expect(r.status).toBe(400);
    expect(r.body.message).toMatch(/^webhook\.url: .*link-local or metadata address/);
  });

  it('still accepts loopback and names resolving there', async () => {
    expect((await submit(transform(`${media.origin}/x.png`))).status).toBe(200);
    expect((await submit(transform(`http://media.example.com:${media.port}/x.png`))).status).toBe(200);
  });

  it.each(['/to-metadata', '/to-metadata-hex'])(
    'fails a job whose loopback media redirects (%s) to the metadata address, without fetching it',
    async (path) => {
      const r = await submit(transform(`${media.origin}${path}`));
      expect(r.status).toBe(200);
      const job = await waitTerminal(svc.call, r.body.data.uuid);
      expect(job.status).toBe('failed');
      expect(job.error_type).toBe('media_fetch_failed');
      expect(job.error_message).toMatch(/link-local or metadata address/);
    },
  );
});
