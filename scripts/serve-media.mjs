#!/usr/bin/env node
/* global process, console -- a Node script */
// Serves sample photographs on http://127.0.0.1:9000/ for the README walk-through:
// sample1.jpg … sample6.jpg ship with @vladmandic/face-api (MIT). Local use only.
import { createReadStream, existsSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';

const dir = path.join(
  path.dirname(createRequire(import.meta.url).resolve('@vladmandic/face-api/package.json')),
  'demo',
);
const port = Number(process.env.MEDIA_PORT ?? 9000);
createServer((req, res) => {
  const name = path.basename(decodeURIComponent((req.url ?? '/').split('?')[0]));
  const file = path.join(dir, name);
  if (!/^[\w.-]+\.(jpg|png)$/.test(name) || !existsSync(file)) return res.writeHead(404).end('not found\n');
  res.writeHead(200, { 'content-type': name.endsWith('.png') ? 'image/png' : 'image/jpeg' });
  createReadStream(file).pipe(res);
}).listen(port, '127.0.0.1', () =>
  console.log(`serving ${dir} on http://127.0.0.1:${port}/ (sample1.jpg … sample6.jpg)`),
);
