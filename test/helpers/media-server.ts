import sharp from 'sharp';
import { startServer, type TestServer } from './servers.js';

export interface MediaServer extends TestServer {
  url(path: string): string;
  /** Releases requests to /hold/* (they wait until then). */
  release(): void;
}

/** Real images over real HTTP on 127.0.0.1, plus misbehaving routes. */
export async function startMediaServer(): Promise<MediaServer> {
  const photo = await sharp({ create: { width: 800, height: 600, channels: 3, background: '#3a7' } })
    .composite([
      {
        input: Buffer.from('<svg width="200" height="100"><rect width="200" height="100" fill="#c33"/></svg>'),
        left: 40,
        top: 40,
      },
    ])
    .jpeg()
    .toBuffer();
  // EXIF orientation 6: stored 800x600, displayed 600x800.
  const rotated = await sharp({ create: { width: 800, height: 600, channels: 3, background: '#36c' } })
    .jpeg()
    .withMetadata({ orientation: 6 })
    .toBuffer();
  const png = await sharp({ create: { width: 64, height: 48, channels: 4, background: '#fff8' } })
    .png()
    .toBuffer();
  // JPEG magic bytes and then garbage: sniffed as a JPEG, undecodable.
  const corrupt = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(2000, 0x42)]);
  let releases: Array<() => void> = [];
  const server = await startServer((req, res) => {
    const p = (req.url ?? '').split('?')[0]!;
    const send = (body: Buffer, type: string) => {
      res.writeHead(200, { 'content-type': type, 'content-length': body.length });
      res.end(body);
    };
    if (p === '/photo.jpg') {
      send(photo, 'image/jpeg');
      return;
    }
    if (p === '/rotated.jpg') {
      send(rotated, 'image/jpeg');
      return;
    }
    if (p === '/small.png') {
      send(png, 'image/png');
      return;
    }
    if (p === '/corrupt.jpg') {
      send(corrupt, 'image/jpeg');
      return;
    }
    if (p === '/page.html') {
      send(Buffer.from('<!doctype html><html><body>hello</body></html>'), 'image/jpeg');
      return;
    }
    if (p.startsWith('/hold/')) {
      // Headers now, body only once released: the job sits in "downloading media".
      res.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': photo.length });
      res.write(photo.subarray(0, 100));
      releases.push(() => res.end(photo.subarray(100)));
      return;
    }
    res.writeHead(404).end('not found');
  });
  return {
    ...server,
    url: (path) => `${server.origin}${path}`,
    release: () => {
      const r = releases;
      releases = [];
      for (const f of r) f();
    },
  };
}
