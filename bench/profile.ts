/**
 * Summarises a V8 CPU profile (`node --cpu-prof`, e.g. from `BENCH_PROFILE=status npm run bench`):
 * top functions by self time, and top packages/files by self time, as shares of the time the
 * thread was busy (idle time is left out).
 *
 *   npx tsx bench/profile.ts bench/results/profiles/<dir or file> [top=25]
 *
 * A directory holds one file per thread; the largest is the main thread's.
 */
import fs from 'node:fs';
import path from 'node:path';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** The main thread's profile in a per-process directory (the largest file), or the file itself. */
export function mainProfile(p: string): string {
  if (!fs.statSync(p).isDirectory()) return p;
  const files = fs
    .readdirSync(p)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => path.join(p, f));
  const biggest = files.sort((a, b) => fs.statSync(b).size - fs.statSync(a).size)[0];
  if (!biggest) throw new Error(`no .cpuprofile in ${p}`);
  return biggest;
}

export function summarise(file: string, top = 25): string {
  const p = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  p.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0)));
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  // Percentages are of busy time: the process also idles (between load runs, waiting on I/O).
  const idleIds = new Set(p.nodes.filter((n) => n.callFrame.functionName === '(idle)').map((n) => n.id));
  const idle = [...self].filter(([id]) => idleIds.has(id)).reduce((a, [, us]) => a + us, 0);
  const busy = total - idle;

  const where = (url: string) => {
    if (!url) return '(native)';
    const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
    if (m) return m[1]!;
    if (url.startsWith('node:')) return url;
    const rel = url.replace(/^file:\/\//, '');
    return path.relative(process.cwd(), rel);
  };
  const fns = new Map<string, number>();
  const mods = new Map<string, number>();
  for (const [id, us] of self) {
    if (idleIds.has(id)) continue;
    const n = byId.get(id)!;
    const f = n.callFrame;
    const name = `${f.functionName || '(anonymous)'}  ${where(f.url)}${f.url ? `:${f.lineNumber + 1}` : ''}`;
    fns.set(name, (fns.get(name) ?? 0) + us);
    const mod = f.url ? where(f.url) : f.functionName.startsWith('(') ? f.functionName : '(native)';
    mods.set(mod, (mods.get(mod) ?? 0) + us);
  }
  const pct = (us: number) => `${((100 * us) / busy).toFixed(1).padStart(5)}%`;
  const sorted = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]).slice(0, top);
  return [
    `${path.relative(process.cwd(), file)}: ${(total / 1e6).toFixed(1)} s sampled, ${(busy / 1e6).toFixed(1)} s busy (percentages are of busy time)`,
    '',
    'self time by function:',
    ...sorted(fns).map(([k, us]) => `  ${pct(us)}  ${k}`),
    '',
    'self time by package / file:',
    ...sorted(mods).map(([k, us]) => `  ${pct(us)}  ${k}`),
  ].join('\n');
}

if (process.argv[1] && import.meta.url.endsWith(path.basename(process.argv[1]))) {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write('usage: npx tsx bench/profile.ts <file.cpuprofile> [top]\n');
    process.exit(2);
  }
  process.stdout.write(`${summarise(mainProfile(file), Number(process.argv[3] ?? 25))}\n`);
}
