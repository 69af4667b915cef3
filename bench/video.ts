/**
 * Video face swap throughput: a 720p/30 fps clip with one face (a pan over a sample photograph),
 * swapped through the job type's run() with the service's default swap threads (plus the job type's
 * one models thread), after the pools' warm-up (models loaded and run once, synthetic and real faces
 * swapped on the swap threads), as in a service's first video job. The job type comes from the compiled build (dist/, built first unless
 * BENCH_NO_BUILD=1), as `npm start` runs it: from TypeScript every worker thread would also carry
 * tsx's loader (~90 MB more RSS than the service has).
 * Prints seconds of processing per second of video (wall clock, and CPU including the ffmpeg
 * processes), and the peak RSS of this process (worker threads included).
 * With `runs` > 1, the same job runs again in the same process and each later run's figures print
 * too (a later job's swap is compiled already: the first job's excess over it is V8's warm-up).
 * Usage: npx tsx bench/video.ts [seconds=4] [threads=default] [runs=1]
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { portrait } from '../test/face-swap/fixtures.js';
import { makeClip } from '../test/video/fixtures.js';
import { videoFaceSwapOptionsSchema } from '../src/processors/video/options.js';

const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
if (!process.env.BENCH_NO_BUILD) {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', path.join(ROOT, 'tsconfig.build.json')], { stdio: 'inherit' });
}
const { createVideoFaceSwapJobType } = (await import(
  pathToFileURL(path.join(ROOT, 'dist/processors/video/face-swap.js')).href
)) as typeof import('../src/processors/video/face-swap.js');

const seconds = Number(process.argv[2] ?? 4);
const threads = Number(process.argv[3] ?? Math.max(1, Math.min(4, os.availableParallelism())));
const runs = Number(process.argv[4] ?? 1);

/** CPU seconds of this process and of its reaped children (ffmpeg), from /proc (clock ticks of 10 ms). */
function cpu(): { self: number; children: number } {
  const f = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  const t = (i: number) => Number(f[i - 3]) / 100;
  return { self: t(14) + t(15), children: t(16) + t(17) };
}
const peakRssMb = () => Number(/VmHWM:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]) / 1024;

const clip = await makeClip({
  region: { left: 1280, top: 210, width: 640, height: 360 },
  width: 1280,
  height: 720,
  fps: 30,
  seconds,
  pan: 0.05,
});
const source = await portrait('curlyBlonde');
const jt = createVideoFaceSwapJobType({ threads });
await jt.warmup();
/** One job through run(): wall seconds and CPU seconds (this process, and ffmpeg). */
async function runJob() {
  const c0 = cpu();
  const t0 = performance.now();
  let lastStage = '';
  const out = await jt.run({
    model: 'warp-blend-track-v1',
    options: videoFaceSwapOptionsSchema.parse({}),
    media: {
      source: [{ url: 'bench', bytes: source, mime: 'image/jpeg' }],
      target: [{ url: 'bench', bytes: clip, mime: 'video/mp4' }],
    },
    signal: new AbortController().signal,
    progress: (s) => (lastStage = s),
  });
  const wall = (performance.now() - t0) / 1000;
  const c1 = cpu();
  return { wall, cpuSelf: c1.self - c0.self, cpuFfmpeg: c1.children - c0.children, lastStage, bytes: out.bytes.length };
}
const { wall, cpuSelf, cpuFfmpeg, lastStage, bytes } = await runJob();
// The first job's peak: later runs only add to it.
const peakRss = peakRssMb();
const later: Awaited<ReturnType<typeof runJob>>[] = [];
for (let i = 1; i < runs; i++) later.push(await runJob());
await jt.close();
const load = os.loadavg()[0]!;
console.log(
  `720p/30 fps, ${seconds} s (${seconds * 30} frames), one face ~420 px, ${threads} swap threads + 1 models thread, load average ${load.toFixed(1)}`,
);
console.log(
  `wall ${wall.toFixed(1)} s = ${(wall / seconds).toFixed(2)} s per video second (${((wall * 1000) / (seconds * 30)).toFixed(0)} ms per frame)`,
);
console.log(
  `CPU ${(cpuSelf + cpuFfmpeg).toFixed(1)} s (${cpuSelf.toFixed(1)} s Node incl. worker threads, ${cpuFfmpeg.toFixed(1)} s ffmpeg) = ${((cpuSelf + cpuFfmpeg) / seconds).toFixed(2)} CPU-s per video second`,
);
console.log(
  `peak RSS of the Node process ${peakRss.toFixed(0)} MB; output ${(bytes / 1e6).toFixed(2)} MB; last stage "${lastStage}"`,
);
later.forEach((r, i) =>
  console.log(
    `run ${i + 2}: wall ${(r.wall / seconds).toFixed(2)} s, CPU ${((r.cpuSelf + r.cpuFfmpeg) / seconds).toFixed(2)} CPU-s per video second`,
  ),
);
console.log(
  JSON.stringify({
    bench: 'video',
    seconds,
    threads,
    wallPerVideoSecond: wall / seconds,
    cpuPerVideoSecond: (cpuSelf + cpuFfmpeg) / seconds,
    peakRssMb: peakRss,
    load,
  }),
);
