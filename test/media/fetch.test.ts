import sharp from 'sharp';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { JobError } from '../../src/errors.js';
import { fetchMedia, type FetchMediaOptions } from '../../src/media/fetch.js';
import { createGuardedAgent } from '../../src/media/guarded-agent.js';
import { checkUrl } from '../../src/media/policy.js';
import { fakeLookup, startServer, type TestServer } from '../helpers/servers.js';

let png: Buffer;
beforeAll(async () => {
  png = await sharp({ create: { width: 2, height: 2, channels: 3, background: '#ff0000' } })
    .png()
    .toBuffer();
});

const servers: TestServer[] = [];
async function serve(...args: Parameters<typeof startServer>): Promise<TestServer> {
  const s = await startServer(...args);
  servers.push(s);
  return s;
}
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

const base: FetchMediaOptions = { allowPrivate: true, maxBytes: 1024 * 1024, timeoutMs: 10_000 };

/** Resolves to the JobError a fetch fails with (fails the test if it succeeds or throws anything else). */
async function fetchError(url: string, opts: FetchMediaOptions): Promise<JobError> {
  const err = await fetchMedia(url, opts).then(
    () => {
      throw new Error('fetch unexpectedly succeeded');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(JobError);
  expect((err as JobError).errorType).toBe('media_fetch_failed');
  return err as JobError;
}

function servePng() {
  return serve((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': png.length });
    res.end(png);
  });
}

describe('fetchMedia', () => {
  it('downloads an image and sniffs its type from the bytes', async () => {
    const s = await servePng();
    const media = await fetchMedia(`${s.origin}/a.png`, base);
    expect(media.mime).toBe('image/png');
    expect(media.bytes.equals(png)).toBe(true);
    expect(media.url).toBe(`${s.origin}/a.png`);
  });

  it('refuses a loopback URL without allowPrivate, before any request', async () => {
    const s = await servePng();
    const err = await fetchError(`${s.origin}/a.png`, { ...base, allowPrivate: false });
    expect(err.message).toBe('download failed: host is a private address');
    expect(s.connections()).toBe(0);
  });

  it('gives mime undefined for bytes of no known type', async () => {
    const s = await serve((_req, res) => res.end('just some text, not media'));
    const media = await fetchMedia(`${s.origin}/x`, base);
    expect(media.mime).toBeUndefined();
    expect(media.bytes.toString()).toBe('just some text, not media');
  });

  it('turns a 404 into media_fetch_failed', async () => {
    const s = await serve((_req, res) => {
      res.statusCode = 404;
      res.end('not found');
    });
    const err = await fetchError(`${s.origin}/missing.png`, base);
    expect(err.message).toBe('download failed: HTTP 404');
  });

  it('reports a refused connection', async () => {
    const s = await serve(() => {});
    const url = `${s.origin}/a.png`;
    await s.close();
    const err = await fetchError(url, base);
    expect(err.message).toBe('download failed: connection refused');
  });

  it('refuses schemes and credentials even with allowPrivate', async () => {
    expect((await fetchError('file:///etc/passwd', base)).message).toBe(
      'download failed: scheme must be http or https',
    );
    const s = await servePng();
    const withCreds = s.origin.replace('http://', 'http://u:p@');
    expect((await fetchError(`${withCreds}/a.png`, base)).message).toBe('download failed: credentials are not allowed');
    expect(s.requests).toEqual([]);
  });

  describe('DNS pinning', () => {
    it('connects to the address the injected resolver returned', async () => {
      const s = await servePng();
      const lookup = fakeLookup({ 'cdn.example.test': ['127.0.0.1'] });
      // 127.0.0.1 counts as public here only to prove that the connection uses the looked-up address.
      const media = await fetchMedia(`http://cdn.example.test:${s.port}/a.png`, {
        ...base,
        allowPrivate: false,
        lookup,
        isPublic: (ip) => ip === '127.0.0.1',
      });
      expect(media.mime).toBe('image/png');
      expect(lookup.calls).toEqual(['cdn.example.test']);
    });

    it('refuses at connect a name that resolves to loopback (DNS rebinding)', async () => {
      const s = await servePng();
      // First answer (the submit-time check) is public, the second (fetch time) is loopback.
      let calls = 0;
      const rebinding = async () => [{ address: ++calls === 1 ? '8.8.8.8' : '127.0.0.1', family: 4 }];
      const url = `http://rebind.example.test:${s.port}/a.png`;
      expect((await checkUrl(url, { allowPrivate: false, lookup: rebinding })).ok).toBe(true);

      const err = await fetchError(url, { ...base, allowPrivate: false, lookup: rebinding });
      expect(err.message).toBe('download failed: host resolves to a private address');
      expect(calls).toBe(2);
      expect(s.connections()).toBe(0);
    });

    it('refuses a name with mixed public and private addresses without connecting', async () => {
      const s = await servePng();
      const lookup = fakeLookup({ 'mixed.example.test': ['8.8.8.8', '127.0.0.1'] });
      const err = await fetchError(`http://mixed.example.test:${s.port}/a.png`, {
        ...base,
        allowPrivate: false,
        lookup,
      });
      expect(err.message).toBe('download failed: host resolves to a private address');
      expect(s.connections()).toBe(0);
    });

    it('reports a name that does not resolve', async () => {
      const err = await fetchError('http://nowhere.example.test/a.png', {
        ...base,
        allowPrivate: false,
        lookup: fakeLookup({}),
      });
      expect(err.message).toBe('download failed: host does not resolve');
    });
  });

  describe('redirects', () => {
    it('follows relative redirects', async () => {
      const s = await serve((req, res) => {
        if (req.url === '/a') return res.writeHead(302, { location: '/b' }).end();
        if (req.url === '/b') return res.writeHead(307, { location: 'c.png' }).end();
        res.end(png);
      });
      const media = await fetchMedia(`${s.origin}/a`, base);
      expect(media.mime).toBe('image/png');
      expect(s.requests).toEqual(['/a', '/b', '/c.png']);
    });

    it('refuses a public host that redirects to loopback; the target sees nothing', async () => {
      const secret = await serve((_req, res) => res.end('secret'));
      const redirector = await serve(
        (_req, res) => res.writeHead(302, { location: `http://127.0.0.1:${secret.port}/secret` }).end(),
        '127.0.0.2',
      );
      const err = await fetchError(`${redirector.origin}/img.png`, {
        ...base,
        allowPrivate: false,
        isPublic: (ip) => ip === '127.0.0.2',
      });
      expect(err.message).toBe('download failed: redirect to a private address is not allowed');
      expect(redirector.requests).toEqual(['/img.png']);
      expect(secret.connections()).toBe(0);
    });

    it('refuses a redirect to a name that resolves to loopback, at connect', async () => {
      const secret = await serve((_req, res) => res.end('secret'));
      const redirector = await serve(
        (_req, res) => res.writeHead(301, { location: `http://internal.example.test:${secret.port}/secret` }).end(),
        '127.0.0.2',
      );
      const lookup = fakeLookup({ 'internal.example.test': ['127.0.0.1'] });
      const err = await fetchError(`${redirector.origin}/img.png`, {
        ...base,
        allowPrivate: false,
        lookup,
        isPublic: (ip) => ip === '127.0.0.2',
      });
      expect(err.message).toBe('download failed: redirect to a private address is not allowed');
      expect(lookup.calls).toEqual(['internal.example.test']);
      expect(secret.connections()).toBe(0);
    });

    it.each([
      ['file:///etc/passwd', 'download failed: redirect target is not allowed (scheme must be http or https)'],
      ['gopher://127.0.0.1:70/_x', 'download failed: redirect target is not allowed (scheme must be http or https)'],
      ['http://u:p@127.0.0.1/', 'download failed: redirect target is not allowed (credentials are not allowed)'],
    ])('refuses a redirect to %s even with allowPrivate', async (location, message) => {
      const s = await serve((_req, res) => res.writeHead(302, { location }).end());
      expect((await fetchError(`${s.origin}/a`, base)).message).toBe(message);
    });

    it('stops after 5 redirects', async () => {
      const s = await serve((req, res) => {
        const n = Number(req.url!.split('/').pop());
        res.writeHead(302, { location: `/r/${n + 1}` }).end();
      });
      const err = await fetchError(`${s.origin}/r/0`, base);
      expect(err.message).toBe('download failed: too many redirects');
      expect(s.requests).toEqual(['/r/0', '/r/1', '/r/2', '/r/3', '/r/4', '/r/5']);
    });

    it('allows exactly maxRedirects hops', async () => {
      const s = await serve((req, res) => {
        const n = Number(req.url!.split('/').pop());
        if (n < 2) return res.writeHead(302, { location: `/r/${n + 1}` }).end();
        res.end(png);
      });
      expect((await fetchMedia(`${s.origin}/r/0`, { ...base, maxRedirects: 2 })).mime).toBe('image/png');
      expect((await fetchError(`${s.origin}/r/0`, { ...base, maxRedirects: 1 })).message).toBe(
        'download failed: too many redirects',
      );
    });
  });

  describe('size limit', () => {
    it('rejects early on a Content-Length over the limit', async () => {
      const s = await serve((_req, res) => {
        res.writeHead(200, { 'content-length': 5000 });
        res.write(Buffer.alloc(100)); // the rest never comes: only the header can end this quickly
      });
      const err = await fetchError(`${s.origin}/big`, { ...base, maxBytes: 1000 });
      expect(err.message).toBe('download failed: larger than 1000 bytes');
    });

    it('counts chunked bytes and aborts an endless stream', async () => {
      const s = await serve((_req, res) => {
        res.writeHead(200); // no content-length: chunked
        const timer = setInterval(() => res.write(Buffer.alloc(256, 1)), 5);
        res.on('close', () => clearInterval(timer));
      });
      const err = await fetchError(`${s.origin}/stream`, { ...base, maxBytes: 1000 });
      expect(err.message).toBe('download failed: larger than 1000 bytes');
    });

    it('accepts a body of exactly maxBytes', async () => {
      const s = await servePng();
      const media = await fetchMedia(`${s.origin}/a.png`, { ...base, maxBytes: png.length });
      expect(media.bytes.length).toBe(png.length);
    });
  });

  describe('time limit and cancel', () => {
    it('times out on a server that never answers', async () => {
      const s = await serve(() => {});
      const started = Date.now();
      const err = await fetchError(`${s.origin}/hang`, { ...base, timeoutMs: 300 });
      expect(err.message).toBe('download failed: timed out after 300ms');
      expect(Date.now() - started).toBeLessThan(5000);
    });

    it('times out on a body that stalls', async () => {
      const s = await serve((_req, res) => {
        res.writeHead(200, { 'content-length': 1000 });
        res.write(Buffer.alloc(10));
      });
      const err = await fetchError(`${s.origin}/stall`, { ...base, timeoutMs: 300 });
      expect(err.message).toBe('download failed: timed out after 300ms');
    });

    it('formats whole seconds', async () => {
      const s = await serve(() => {});
      const err = await fetchError(`${s.origin}/hang`, { ...base, timeoutMs: 1000 });
      expect(err.message).toBe('download failed: timed out after 1s');
    });

    it('an abort signal stops a slow download with its own reason', async () => {
      const s = await serve((_req, res) => {
        res.writeHead(200);
        const timer = setInterval(() => res.write('x'), 20);
        res.on('close', () => clearInterval(timer));
      });
      const controller = new AbortController();
      const reason = new Error('job cancelled');
      setTimeout(() => controller.abort(reason), 150);
      const started = Date.now();
      const err = await fetchMedia(`${s.origin}/slow`, { ...base, signal: controller.signal }).catch((e: unknown) => e);
      expect(err).toBe(reason);
      expect(Date.now() - started).toBeLessThan(5000);
    });

    it('an abort while waiting for headers keeps the reason too', async () => {
      const s = await serve(() => {});
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 100);
      const err = await fetchMedia(`${s.origin}/hang`, { ...base, signal: controller.signal }).catch((e: unknown) => e);
      expect(err).toBe(controller.signal.reason);
      expect((err as Error).name).toBe('AbortError');
    });

    it('an already aborted signal sends nothing', async () => {
      const s = await servePng();
      const reason = new Error('cancelled before start');
      const err = await fetchMedia(`${s.origin}/a.png`, { ...base, signal: AbortSignal.abort(reason) }).catch(
        (e: unknown) => e,
      );
      expect(err).toBe(reason);
      expect(s.requests).toEqual([]);
    });
  });

  it('works with a shared guarded agent passed as dispatcher', async () => {
    const s = await servePng();
    const agent = createGuardedAgent({ allowPrivate: true });
    try {
      for (let i = 0; i < 3; i++) {
        expect((await fetchMedia(`${s.origin}/a.png`, { ...base, dispatcher: agent })).mime).toBe('image/png');
      }
    } finally {
      await agent.close();
    }
  });
});
