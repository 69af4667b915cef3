/**
 * A helper process for the benchmark, on 127.0.0.1 (plain node:http, as cheap as it gets):
 *   POST /hook            webhook receiver; mode `ok` answers 200, mode `flaky` answers 500 to the
 *                         first attempt of every event (by X-Service-Event-Id) and 200 to the retry,
 *                         so half of all attempts fail and every event is delivered
 *   GET  /stats           counters since the last reset (JSON), TCP connections opened included
 *   POST /reset?mode=ok   zero the counters and set the mode
 *   GET  /media/big.jpg   the file named by MEDIA_FILE (input for CPU-heavy jobs)
 */
import fs from 'node:fs';
import http from 'node:http';

const media = process.env.MEDIA_FILE ? fs.readFileSync(process.env.MEDIA_FILE) : undefined;
const now = () => performance.timeOrigin + performance.now();

let mode: 'ok' | 'flaky' = 'ok';
let stats = fresh();
let seen = new Set<string>();
let delivered = new Set<string>();

function fresh() {
  return { hits: 0, ok: 0, failed: 0, delivered: 0, duplicates: 0, firstAt: 0, lastOkAt: 0, connections: 0 };
}

const server = http.createServer((req, res) => {
  const url = req.url ?? '/';
  if (req.method === 'POST' && url === '/hook') {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const t = now();
      stats.hits++;
      if (stats.firstAt === 0) stats.firstAt = t;
      const id = String(req.headers['x-service-event-id'] ?? '');
      if (mode === 'flaky' && !seen.has(id)) {
        seen.add(id);
        stats.failed++;
        res.writeHead(500, { 'content-type': 'text/plain' }).end('try again');
        return;
      }
      stats.ok++;
      stats.lastOkAt = t;
      if (delivered.has(id)) stats.duplicates++;
      else delivered.add(id);
      stats.delivered = delivered.size;
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    });
    return;
  }
  if (req.method === 'GET' && url === '/stats') {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(stats));
    return;
  }
  if (req.method === 'POST' && url.startsWith('/reset')) {
    mode = new URL(url, 'http://x').searchParams.get('mode') === 'flaky' ? 'flaky' : 'ok';
    stats = fresh();
    seen = new Set();
    delivered = new Set();
    res.writeHead(200).end();
    return;
  }
  if (req.method === 'GET' && url === '/media/big.jpg' && media) {
    res.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': media.length }).end(media);
    return;
  }
  res.writeHead(404).end();
});
server.on('connection', () => stats.connections++);
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT), '127.0.0.1', () => process.stderr.write(`BENCH_READY pid=${process.pid}\n`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
