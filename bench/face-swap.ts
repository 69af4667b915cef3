/**
 * Face-swap benchmark: time per swap for a 1920x1280 target on ONE worker thread, through the job
 * type's public run() (worker pool, progress port and all), after the pool's warm-up (models loaded,
 * detectors, landmarks and encoder run once on a synthetic picture: worker.ts / warmup.ts).
 *
 *   npx tsx bench/face-swap.ts [iterations=5]
 *
 * The first swap of the fresh thread is reported on its own ("first swap"), with its stages; the
 * median and the stage medians are over the later, warm swaps.
 * Two targets, both 1920x1280: a close-up (one face ~700 px wide: the most pixels to warp and blend)
 * and a group photo (sample1, three ~200 px faces, the largest replaced). Stage times come from the
 * progress messages the worker sends ("detecting faces" covers decoding too). The main thread's
 * event-loop delay is sampled meanwhile, to show the work really is off the event loop.
 * Wall times depend on what else the machine runs; so the same swaps are then run in-process and
 * their CPU time (user + system, all threads) is reported too, per swap and per stage (from one
 * progress message to the next): about what one swap costs on an idle core, and the steadier
 * figure to compare builds by on a loaded machine.
 * Target (issue 18): at most 0.5 s of processing (warm median) for the 1920x1280 target with one
 * ~350 px face; the other cases are informational.
 */
import { sample } from '../test/face-swap/fixtures.js';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import os from 'node:os';
import sharp from 'sharp';
import { createFaceSwapJobType } from '../src/processors/face-swap/index.js';
import { runFaceSwap } from '../src/processors/face-swap/pipeline.js';
import type { FaceSwapOptions } from '../src/processors/face-swap/index.js';
import type { RunContext } from '../src/processors/types.js';

const iterations = Math.max(1, Number(process.argv[2] ?? 5));

const source = await sharp(sample(3))
  .extract({ left: 425, top: 167, width: 520, height: 520 })
  .jpeg({ quality: 92 })
  .toBuffer();
/** The case: the only one with a target. */
const TARGET_CASE = 'one face ~350 px, 1920x1280';
const TARGET_MS = 500;
const targets = {
  // The case: sample6 (1537 px tall) cropped to 3:2 around its right half and scaled to
  // 1920x1280, so its largest face is about 350 px (the other, smaller faces stay as they are).
  [TARGET_CASE]: await sharp(sample(6))
    .extract({ left: 529, top: 0, width: 1391, height: 927 })
    .resize(1920, 1280)
    .jpeg({ quality: 90 })
    .toBuffer(),
  // sample6's right-hand face with its surroundings (3:2), resized UP to 1920x1280.
  'close-up 1920x1280 (face ~700 px)': await sharp(sample(6))
    .extract({ left: 1230, top: 110, width: 660, height: 440 })
    .resize(1920, 1280)
    .jpeg({ quality: 90 })
    .toBuffer(),
  // sample1 is 1920x1280 already: three faces about 200 px wide.
  'group 1920x1280 (faces ~200 px)': sample(1),
};

const jt = createFaceSwapJobType({ threads: 1 });
let t0 = performance.now();
await jt.warmup();
console.log(
  `warm-up (thread start, model load, one detection on a synthetic picture): ${(performance.now() - t0).toFixed(0)} ms`,
);
console.log(
  `machine: ${os.cpus().length} CPUs, load average ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};

const STAGES = ['detecting faces', 'swapping faces', 'encoding'] as const;
const ms = (x: number) => `${x.toFixed(0)} ms`;
const summary: Record<string, unknown> = {};
let fresh = true;
for (const [label, target] of Object.entries(targets)) {
  const meta = await sharp(target).metadata();
  const totals: number[] = [];
  const stages: Record<string, number[]> = Object.fromEntries(STAGES.map((s) => [s, []]));
  let first: { totalMs: number; stages: Record<string, number> } | undefined;
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  // On the fresh thread (the first case) one more swap: the first, reported apart from the warm ones.
  const runs = fresh ? iterations + 1 : iterations;
  for (let i = 0; i < runs; i++) {
    const marks: [string, number][] = [];
    const ctx: RunContext<FaceSwapOptions> = {
      model: 'warp-blend-v1',
      options: jt.options.parse({}),
      media: {
        source: [{ url: 'bench:source', bytes: source, mime: 'image/jpeg' }],
        target: [{ url: 'bench:target', bytes: target, mime: 'image/jpeg' }],
      },
      signal: new AbortController().signal,
      progress: (s) => marks.push([s, performance.now()]),
    };
    t0 = performance.now();
    await jt.run(ctx);
    const end = performance.now();
    const perStage = Object.fromEntries(marks.map(([name, at], k) => [name, (marks[k + 1]?.[1] ?? end) - at]));
    if (fresh && i === 0) {
      first = { totalMs: end - t0, stages: perStage };
      continue;
    }
    totals.push(end - t0);
    for (const name of STAGES) if (perStage[name] !== undefined) stages[name]!.push(perStage[name]);
  }
  fresh = false;
  loop.disable();
  const targetMs = label === TARGET_CASE ? TARGET_MS : undefined;
  console.log(
    `\n${label} (${meta.width}x${meta.height}), ${iterations} warm swaps on 1 worker thread` +
      (targetMs ? ` (target: median <= ${ms(targetMs)})` : ' (informational)'),
  );
  if (first) {
    const parts = STAGES.map((s) => `${s} ${ms(first.stages[s] ?? 0)}`).join(', ');
    console.log(`  first swap of the fresh thread (after warm-up): ${ms(first.totalMs)} (${parts})`);
  }
  console.log(
    `  per swap: median ${ms(quantile(totals, 0.5))}, min ${ms(Math.min(...totals))}, max ${ms(Math.max(...totals))}`,
  );
  for (const [name, xs] of Object.entries(stages)) console.log(`  ${name.padEnd(16)} median ${ms(quantile(xs, 0.5))}`);
  console.log(
    `  main-thread event-loop delay meanwhile: p99 ${ms(loop.percentile(99) / 1e6)}, max ${ms(loop.max / 1e6)}`,
  );
  // The same swap in this thread, for its CPU time (models load here on the first call, untimed).
  const input = { source, target, options: jt.options.parse({}), maxPixels: 40_000_000 };
  const cpuNow = () => {
    const c = process.cpuUsage();
    return (c.user + c.system) / 1000;
  };
  let cpuMarks: [string, number][] = [];
  const hooks = { progress: (s: string) => cpuMarks.push([s, cpuNow()]), checkAborted: () => {} };
  await runFaceSwap(input, hooks);
  const cpu: number[] = [];
  const stageCpu: Record<string, number[]> = Object.fromEntries(STAGES.map((s) => [s, []]));
  for (let i = 0; i < iterations; i++) {
    cpuMarks = [];
    const c0 = cpuNow();
    await runFaceSwap(input, hooks);
    const end = cpuNow();
    cpu.push(end - c0);
    // CPU per stage: from its progress message to the next (the last to the end).
    cpuMarks.forEach(([name, at], k) => stageCpu[name]?.push((cpuMarks[k + 1]?.[1] ?? end) - at));
  }
  console.log(`  CPU time per swap (in-process, all threads): median ${ms(quantile(cpu, 0.5))}`);
  for (const [name, xs] of Object.entries(stageCpu)) {
    if (xs.length) console.log(`  CPU ${name.padEnd(16)} median ${ms(quantile(xs, 0.5))}, min ${ms(Math.min(...xs))}`);
  }
  summary[label] = {
    medianMs: Math.round(quantile(totals, 0.5)),
    cpuMs: Math.round(quantile(cpu, 0.5)),
    stageCpuMedianMs: Object.fromEntries(
      Object.entries(stageCpu)
        .filter(([, xs]) => xs.length)
        .map(([k, xs]) => [k, Math.round(quantile(xs, 0.5))]),
    ),
    minMs: Math.round(Math.min(...totals)),
    maxMs: Math.round(Math.max(...totals)),
    eventLoopP99Ms: Math.round(loop.percentile(99) / 1e6),
    stageMedianMs: Object.fromEntries(Object.entries(stages).map(([k, xs]) => [k, Math.round(quantile(xs, 0.5))])),
    ...(first ? { firstMs: Math.round(first.totalMs) } : {}),
    ...(targetMs ? { targetMs } : {}),
  };
}
await jt.close();
console.log(`\n${JSON.stringify({ bench: 'face-swap', iterations, results: summary })}`);
