import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { BlockedAddressError, createGuardedAgent } from '../../src/media/guarded-agent.js';
import { fakeLookup, startServer, type TestServer } from '../helpers/servers.js';

// The agent on its own, used the way the webhook dispatcher will use it (POST, no redirects).

const servers: TestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function echo(): Promise<TestServer> {
  const s = await startServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(204).end());
  });
  servers.push(s);
  return s;
}

function post(url: string, dispatcher: ReturnType<typeof createGuardedAgent>) {
  return request(url, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' }, dispatcher });
}

describe('createGuardedAgent', () => {
  it.each(['127.0.0.1', '[::1]', '[::ffff:127.0.0.1]'])('refuses the IP literal %s before connecting', async (host) => {
    const s = await echo();
    const agent = createGuardedAgent({ allowPrivate: false });
    try {
      const err = await post(`http://${host}:${s.port}/hook`, agent).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(BlockedAddressError);
      expect((err as BlockedAddressError).code).toBe('ERR_BLOCKED_ADDRESS');
      expect(s.connections()).toBe(0);
    } finally {
      await agent.close();
    }
  });

  it('refuses a name resolving to loopback, and one with any private address', async () => {
    const s = await echo();
    const lookup = fakeLookup({ 'hooks.example.test': ['127.0.0.1'], 'mixed.example.test': ['8.8.8.8', '127.0.0.1'] });
    const agent = createGuardedAgent({ allowPrivate: false, lookup });
    try {
      for (const name of ['hooks.example.test', 'mixed.example.test']) {
        const err = await post(`http://${name}:${s.port}/hook`, agent).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(BlockedAddressError);
      }
      expect(s.connections()).toBe(0);
    } finally {
      await agent.close();
    }
  });

  it('delivers when the address is public (per isPublic) or allowPrivate is on', async () => {
    const s = await echo();
    const lookup = fakeLookup({ 'hooks.example.test': ['127.0.0.1'] });
    const pinned = createGuardedAgent({ allowPrivate: false, lookup, isPublic: (ip) => ip === '127.0.0.1' });
    const open = createGuardedAgent({ allowPrivate: true });
    try {
      const a = await post(`http://hooks.example.test:${s.port}/a`, pinned);
      expect(a.statusCode).toBe(204);
      await a.body.dump();
      const b = await post(`${s.origin}/b`, open);
      expect(b.statusCode).toBe(204);
      await b.body.dump();
      expect(s.requests).toEqual(['/a', '/b']);
    } finally {
      await Promise.all([pinned.close(), open.close()]);
    }
  });

  it('with allowPrivate still refuses link-local and metadata addresses, literal or resolved', async () => {
    const lookup = fakeLookup({
      'metadata.example.test': ['169.254.169.254'],
      'v6meta.example.test': ['fd00:ec2::254'],
      'mapped.example.test': ['::ffff:169.254.169.254'],
    });
    const agent = createGuardedAgent({ allowPrivate: true, lookup });
    try {
      for (const url of [
        'http://169.254.169.254/latest/meta-data/',
        'http://[fe80::1]/',
        'http://[fd00:ec2::254]/',
        'http://[::ffff:a9fe:a9fe]/',
        'http://metadata.example.test/latest/meta-data/',
        'http://v6meta.example.test/',
        'http://mapped.example.test/',
      ]) {
        const err = await post(url, agent).catch((e: unknown) => e);
        expect(err, url).toBeInstanceOf(BlockedAddressError);
      }
    } finally {
      await agent.close();
    }
  });

  it('checks the address the socket actually reached', async () => {
    const s = await echo();
    // A resolver-time verdict that changes by connect time: the post-connect check still refuses.
    let verdicts = 0;
    const agent = createGuardedAgent({
      allowPrivate: false,
      lookup: fakeLookup({ 'flip.example.test': ['127.0.0.1'] }),
      isPublic: () => ++verdicts === 1,
    });
    try {
      const err = await post(`http://flip.example.test:${s.port}/hook`, agent).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(BlockedAddressError);
      expect(verdicts).toBe(2);
      expect(s.requests).toEqual([]);
    } finally {
      await agent.close();
    }
  });

  it('does not follow redirects (undici request never does)', async () => {
    const s = await startServer((_req, res) => res.writeHead(302, { location: 'http://127.0.0.1:1/' }).end());
    servers.push(s);
    const agent = createGuardedAgent({ allowPrivate: true });
    try {
      const res = await post(`${s.origin}/hook`, agent);
      expect(res.statusCode).toBe(302);
      await res.body.dump();
    } finally {
      await agent.close();
    }
  });
});
