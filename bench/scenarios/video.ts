/**
 * The video face swap benchmark (bench/video.ts, run in its own process): seconds of processing per
 * second of 720p/30 fps video with one face, and the peak RSS. Run alone: BENCH_ONLY=video npm run bench.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { log, raw, ROOT, setScenario, type Row } from '../lib.js';

const SCRIPT = path.join(ROOT, 'bench/video.ts');
/** Issue 18's targets, on this 2-core machine. */
const TARGET_S_PER_S = 2.5;
const TARGET_RSS_MB = 600;

interface Summary {
  seconds: number;
  threads: number;
  wallPerVideoSecond: number;
  cpuPerVideoSecond: number;
  peakRssMb: number;
  load: number;
}

export async function videoScenario(): Promise<{ rows: Row[]; lines: string[] }> {
  setScenario('video');
  const args = process.env.BENCH_VIDEO_SECONDS ? [process.env.BENCH_VIDEO_SECONDS] : [];
  const proc = spawn(process.execPath, ['--import', 'tsx', SCRIPT, ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((resolve) => proc.on('exit', resolve));
  const lines = out.split('\n').filter((l) => l.trim() !== '');
  for (const l of lines) if (!l.startsWith('{')) log(`  ${l}`);
  if (code !== 0) throw new Error(`bench/video.ts exited with ${code}: ${err.trim().split('\n').slice(-3).join(' ')}`);
  const json = lines.filter((l) => l.startsWith('{')).pop();
  if (!json) return { rows: [], lines };
  const s = JSON.parse(json) as Summary;
  raw.video = s;
  return {
    rows: [
      {
        scenario: 'video face swap',
        case: `720p/30 fps, one face, ${s.seconds} s clip, ${s.threads} swap threads + 1 models thread`,
        value: `${s.wallPerVideoSecond.toFixed(2)} s per video second (CPU ${s.cpuPerVideoSecond.toFixed(2)} s incl. ffmpeg)`,
        reference: `peak RSS ${Math.round(s.peakRssMb)} MB; load average ${s.load.toFixed(1)}`,
        target: `≤ ${TARGET_S_PER_S} s per video second, ≤ ${TARGET_RSS_MB} MB`,
        ok: s.wallPerVideoSecond <= TARGET_S_PER_S && s.peakRssMb <= TARGET_RSS_MB,
      },
    ],
    lines: lines.filter((l) => !l.startsWith('{')),
  };
}
