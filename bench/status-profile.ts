/**
 * The status route's CPU cost per request, against bare Fastify, for A/B work on a loaded machine:
 * each round sends a fixed number of `GET /api/v1/jobs/{uuid}/status` requests (64 connections)
 * to the service and to bare Fastify (bench/bare.ts, an envelope of the same size) and reads each
 * server's CPU time (user + system, /proc) over what it answered. Rounds alternate the servers,
 * so a busy neighbour weighs on both alike; medians are printed.
 *
 *   npx tsx bench/status-profile.ts [requests=100000] [rounds=5]
 *
 * STATUS_BASE=<dir>: also runs that tree's bench/service.ts (e.g. `git archive` of main with a
 * node_modules link) on the same database, alternating with this one: an A/B of two builds.
 * STATUS_ENV='K=V,K=V': extra environment for the service(s) (e.g. LOG_LEVEL=info).
 * STATUS_CONNECTIONS: connections (default 64, as the bench; fewer leave each event-loop turn one request).
 * STATUS_CALLGRIND=<file>: runs this tree's service under `valgrind --tool=callgrind`
 * (instruction counts are repeatable under load; expect it to be ~50× slower).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import {
  completedNoopStatus,
  authHeaders,
  cpuMicros,
  freePort,
  freshStore,
  median,
  ROOT,
  serviceEnv,
  waitUntil,
  type BenchStore,
} from './lib.js';

const requests = Number(process.argv[2] ?? 100_000);
const rounds = Number(process.argv[3] ?? 5);
const connections = Number(process.env.STATUS_CONNECTIONS ?? 64);

interface Server {
  name: string;
  proc: ChildProcess;
  pid: number;
  base: string;
}

/** `node --import tsx <root>/bench/<script>` (or valgrind running it), ready once it says BENCH_READY. */
async function start(name: string, root: string, script: string, env: Record<string, string>, callgrind?: string) {
  const node = [process.execPath, '--import', 'tsx', path.join(root, 'bench', script)];
  const argv = callgrind
    ? ['valgrind', '--tool=callgrind', `--callgrind-out-file=${callgrind}`, '--trace-children=no', ...node]
    : node;
  const proc = spawn(argv[0]!, argv.slice(1), {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  proc.stderr.on('data', (d: Buffer) => (err += d.toString()));
  await waitUntil(`${name} to start`, () => Promise.resolve(err.includes('BENCH_READY')), 600_000, 100);
  const pid = Number(/BENCH_READY pid=(\d+)/.exec(err)![1]);
  return { name, proc, pid, base: `http://127.0.0.1:${env.PORT}` } satisfies Server;
}

async function startService(name: string, root: string, store: BenchStore, extra: Record<string, string>) {
  const port = String(await freePort());
  const env = serviceEnv(store, { PORT: port, PUBLIC_BASE_URL: `http://127.0.0.1:${port}`, WORKER_CONCURRENCY: '1' });
  const callgrind = root === ROOT ? process.env.STATUS_CALLGRIND : undefined;
  return start(name, root, 'service.ts', { ...env, ...extra }, callgrind);
}

/** Service CPU µs per request over `amount` requests. */
async function measure(s: Server, url: string, headers: Record<string, string>, amount: number): Promise<number> {
  const cpu0 = cpuMicros(s.pid)!;
  const r = await autocannon({ url, connections, amount, headers });
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`${s.name}: ${r.non2xx} non-2xx, ${r.errors} errors`);
  return (cpuMicros(s.pid)! - cpu0) / r.requests.total;
}

function extraEnv(): Record<string, string> {
  const given = process.env.STATUS_ENV;
  if (!given) return {};
  return Object.fromEntries(given.split(',').map((kv) => kv.split('=', 2) as [string, string]));
}

const store = await freshStore('sqlite');
const servers: Server[] = [];
try {
  const extra = extraEnv();
  const ours = await startService('ours', ROOT, store, extra);
  servers.push(ours);
  const baseRoot = process.env.STATUS_BASE;
  if (baseRoot) servers.push(await startService('base', path.resolve(baseRoot), store, extra));

  const { path: statusPath, text } = await completedNoopStatus(ours.base, store.key);
  const barePort = String(await freePort());
  servers.push(await start('bare', ROOT, 'bare.ts', { PORT: barePort, BARE_BODY: text }));

  const headers = authHeaders(store.key);
  const runOf = (s: Server, amount: number) =>
    measure(s, `${s.base}${statusPath}`, s.name === 'bare' ? {} : headers, amount);
  for (const s of servers) await runOf(s, Math.min(20_000, requests)); // warm-up (JIT, page cache)
  const results = new Map<string, number[]>(servers.map((s) => [s.name, []]));
  for (let i = 0; i < rounds; i++) {
    const line: string[] = [];
    for (const s of i % 2 === 0 ? servers : [...servers].reverse()) {
      const us = await runOf(s, requests);
      results.get(s.name)!.push(us);
      line.push(`${s.name} ${us.toFixed(1)}`);
    }
    process.stdout.write(`round ${i + 1}: ${line.join(', ')} µs CPU/req (load ${os.loadavg()[0]!.toFixed(1)})\n`);
  }
  const bare = median(results.get('bare')!);
  for (const [name, xs] of results) {
    const m = median(xs);
    process.stdout.write(`${name}: median ${m.toFixed(1)} µs CPU/req, bare/${name} ${(bare / m).toFixed(2)}\n`);
  }
} finally {
  for (const s of servers) s.proc.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 2_000));
  await store.dispose();
}
