/**
 * `npm run bench`: starts everything it needs on 127.0.0.1, runs each scenario (medians over
 * BENCH_ROUNDS rounds), prints the table and writes bench/results/latest.md (+ latest.json and
 * summary.md, the short table for the README). See bench/README.md.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import {
  dropLeftoverDatabases,
  killAll,
  LOG_DIR,
  log,
  memory,
  notes,
  PG_ADMIN_URL,
  raw,
  RESULTS_DIR,
  ROOT,
  settings,
  setScenario,
  type Row,
} from './lib.js';
import { statusScenario } from './scenarios/status.js';
import { submitScenario } from './scenarios/submit.js';
import { queueScenario } from './scenarios/queue.js';
import { backlogScenario } from './scenarios/backlog.js';
import { webhookScenario } from './scenarios/webhooks.js';
import { isolationScenario } from './scenarios/isolation.js';
import { faceSwapScenario } from './scenarios/face-swap.js';
import { videoScenario } from './scenarios/video.js';
import { remoteScenario } from './scenarios/remote.js';
import { batchScenario } from './scenarios/batch.js';

const require = createRequire(import.meta.url);
const version = (pkg: string) => (require(`${pkg}/package.json`) as { version: string }).version;

const scenarios: Array<[string, () => Promise<{ rows: Row[]; lines?: string[] }>]> = [
  ['status', async () => ({ rows: await statusScenario() })],
  ['submit', async () => ({ rows: await submitScenario() })],
  ['batch', async () => ({ rows: await batchScenario() })],
  ['queue', async () => ({ rows: await queueScenario() })],
  ['backlog', async () => ({ rows: await backlogScenario() })],
  ['webhooks', async () => ({ rows: await webhookScenario() })],
  ['isolation', async () => ({ rows: await isolationScenario() })],
  ['remote', async () => ({ rows: await remoteScenario() })],
  ['face-swap', faceSwapScenario],
  ['video', videoScenario],
];

async function versions(): Promise<Record<string, string>> {
  const mem = new SQLite(':memory:');
  const sqlite = (mem.prepare('select sqlite_version() as v').get() as { v: string }).v;
  mem.close();
  let postgres = 'unreachable';
  try {
    const c = new pg.Client({ connectionString: PG_ADMIN_URL });
    await c.connect();
    postgres = (await c.query<{ server_version: string }>('SHOW server_version')).rows[0]!.server_version;
    await c.end();
  } catch {
    /* reported as unreachable */
  }
  const service = (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  return {
    node: process.version,
    'media-jobs': service,
    fastify: version('fastify'),
    sqlite: `${sqlite} (better-sqlite3 ${version('better-sqlite3')})`,
    postgres,
    'pg-boss': version('pg-boss'),
    autocannon: version('autocannon'),
  };
}

const esc = (s: string) => s.replace(/\|/g, '\\|');

function table(rows: Row[]): string {
  const lines = [
    '| scenario | case | media-jobs | reference (same run) | target / ratio | met |',
    '|---|---|---|---|---|---|',
  ];
  for (const r of rows) {
    const met = r.ok === undefined ? '' : r.ok ? 'yes' : '**no**';
    lines.push(
      `| ${esc(r.scenario)} | ${esc(r.case)} | ${esc(r.value)} | ${esc(r.reference ?? '')} | ${esc(r.target ?? '')} | ${met} |`,
    );
  }
  return lines.join('\n');
}

function memoryTable(): { md: string; rows: Row[] } {
  const peak = new Map<string, { scenario: string; name: string; peakMb: number; n: number }>();
  for (const m of memory) {
    const name = m.name.replace(/-\d+$/, '-N');
    const k = `${m.scenario}|${name}`;
    const cur = peak.get(k);
    if (!cur) peak.set(k, { scenario: m.scenario, name, peakMb: m.peakMb, n: 1 });
    else {
      cur.peakMb = Math.max(cur.peakMb, m.peakMb);
      cur.n++;
    }
  }
  const lines = ['| scenario | process | peak RSS (VmHWM), max over its runs | runs |', '|---|---|---|---|'];
  const byScenario = new Map<string, number>();
  for (const p of peak.values()) {
    lines.push(`| ${p.scenario} | ${p.name} | ${Math.round(p.peakMb)} MB | ${p.n} |`);
    if (!/bare|receiver|media-server|pgboss/.test(p.name))
      byScenario.set(p.scenario, Math.max(byScenario.get(p.scenario) ?? 0, p.peakMb));
  }
  const rows: Row[] = [...byScenario].map(([scenario, mb]) => ({
    scenario: '6 memory',
    case: `${scenario}: largest service process`,
    value: `${Math.round(mb)} MB peak RSS`,
  }));
  return { md: lines.join('\n'), rows };
}

async function main(): Promise<void> {
  const started = Date.now();
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  fs.rmSync(LOG_DIR, { recursive: true, force: true });
  const cpus = os.cpus();
  const startLoad = os.loadavg()[0]!.toFixed(1);
  const v = await versions();
  log(
    `media-jobs benchmark: ${cpus.length} CPUs (${cpus[0]?.model.trim()}), ${settings.rounds} rounds, ${settings.duration} s per load run`,
  );
  log(
    Object.entries(v)
      .map(([k, x]) => `${k} ${x}`)
      .join(', '),
  );

  const rows: Row[] = [];
  const extra: string[] = [];
  const timings: string[] = [];
  for (const [name, run] of scenarios) {
    if (settings.only.length > 0 && !settings.only.includes(name)) continue;
    const t0 = Date.now();
    log(`\n== ${name}`);
    try {
      const out = await run();
      rows.push(...out.rows);
      if (out.lines?.length) extra.push(...out.lines);
    } catch (err) {
      const msg = (err as Error).message.split('\n')[0]!;
      log(`  FAILED: ${(err as Error).stack ?? msg}`);
      rows.push({ scenario: name, case: 'scenario failed', value: `error: ${msg}` });
    }
    timings.push(`${name} ${Math.round((Date.now() - t0) / 1000)} s, load ${os.loadavg()[0]!.toFixed(1)}`);
  }
  setScenario('done');
  const mem = memoryTable();
  rows.push(...mem.rows);

  const minutes = ((Date.now() - started) / 60_000).toFixed(1);
  const header = [
    `Measured ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC on ${cpus.length} CPUs (${cpus[0]?.model.trim()}), ` +
      `${Math.round(os.totalmem() / 2 ** 30)} GiB RAM, ${os.type()} ${os.release()}.`,
    `Versions: ${Object.entries(v)
      .map(([k, x]) => `${k} ${x}`)
      .join(', ')}.`,
    `Medians of ${settings.rounds} rounds; ${settings.duration} s per headline autocannon run (${settings.shortDuration} s for submit variants and info logs); ` +
      `load generator, service, references and PostgreSQL share the machine.`,
    `Whole run: ${minutes} min. Per scenario, its duration and the 1-minute load average at its end ` +
      `(anything above the CPU count means other processes competed for the CPUs): ${timings.join('; ')}; load average at the start ${startLoad}.`,
  ].join('\n');
  const md = [
    '# media-jobs benchmark: latest run',
    '',
    header,
    '',
    table(rows),
    '',
    ...(notes.length ? ['Notes from the run:', '', ...notes.map((n) => `- ${n}`), ''] : []),
    '## Peak memory per process',
    '',
    mem.md,
    '',
    ...(extra.length ? ['## Face swap (bench/face-swap.ts output)', '', '```', ...extra, '```', ''] : []),
    'How to read this table, and what each scenario does: [bench/README.md](../README.md). Raw per-round numbers: `latest.json`.',
    '',
  ].join('\n');
  const summaryRows = rows.filter((r) => !r.detail);
  const summary = [header, '', table(summaryRows), ''].join('\n');
  // A run of some scenarios only (BENCH_ONLY) must not overwrite the full results.
  const base = settings.only.length > 0 ? 'partial' : 'latest';
  fs.writeFileSync(path.join(RESULTS_DIR, `${base}.md`), md);
  if (base === 'latest') fs.writeFileSync(path.join(RESULTS_DIR, 'summary.md'), summary);
  fs.writeFileSync(
    path.join(RESULTS_DIR, `${base}.json`),
    `${JSON.stringify({ versions: v, settings, cpus: cpus.length, rows, memory, notes, raw }, null, 2)}\n`,
  );
  log(`\n${table(rows)}\n`);
  if (notes.length) log(notes.map((n) => `note: ${n}`).join('\n'));
  log(`\nwrote bench/results/${base}.md${base === 'latest' ? ', summary.md' : ''} and ${base}.json (${minutes} min)`);
}

const bail = () => {
  killAll();
  const timer = setTimeout(() => process.exit(130), 5_000);
  void dropLeftoverDatabases().finally(() => {
    clearTimeout(timer);
    process.exit(130);
  });
};
process.on('SIGINT', bail);
process.on('SIGTERM', bail);
main().then(
  () => process.exit(0),
  async (err: unknown) => {
    killAll();
    process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
    await dropLeftoverDatabases();
    process.exit(1);
  },
);
