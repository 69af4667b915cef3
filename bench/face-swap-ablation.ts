/**
 * What each stage of the face swap costs the identity: the contact sheet's swaps (every face >= 100 px
 * of face-api's six sample photos and the rolled ones, from sample6's right-hand woman) run in-process
 * under several configurations, each leaving one stage out or changing one knob. For each it prints
 * the self-swap (the source's own face in sample6, swapped onto itself: a perfect pipeline leaves it
 * where it was) and, over the other faces, the median and worst descriptor distance to the source,
 * how many are under 0.45, how many end farther than the original, and the median landmark
 * agreement (result's landmarks vs the target's, over the eye distance).
 *
 *   npx tsx bench/face-swap-ablation.ts [--self] [config ...]     (default: every config below)
 *
 * --self runs the self-swap only (seconds instead of minutes). Detection and landmarks are those of
 * the job (findFaces, refineLandmarks, the level frame), computed once and shared by every config.
 */
import {
  computeDescriptor,
  descriptorDistance,
  detectLandmarks,
  findFaces,
  findLargeFaces,
  largestFaceLandmarks,
  leftToRight,
  refineLandmarks,
} from '../src/processors/face-swap/detect.js';
import { decodeImage } from '../src/processors/face-swap/image.js';
import { levelled, swapLevelled } from '../src/processors/face-swap/level.js';
import { DEFAULT_TUNING, extendForehead, type SwapOptions, type SwapTuning } from '../src/processors/face-swap/swap.js';
import type { Box, Point, RgbImage } from '../src/processors/face-swap/types.js';
import { sheetSource, sheetTargets } from '../test/face-swap/fixtures.js';

interface Config {
  opts?: Partial<SwapOptions>;
  tuning?: Partial<SwapTuning>;
}

/** One stage out (or one knob changed) at a time. */
const CONFIGS: Record<string, Config> = {
  baseline: {},
  'no colour': { opts: { colorCorrection: false } },
  'feather blend': { opts: { blend: 'feather' } },
  'no occlusion': { opts: { occlusion: false } },
  'no red-eye': { tuning: { skip: ['redeye'] } },
  'no hair fill': { tuning: { skip: ['hairFill'] } },
  'no detail': { tuning: { skip: ['detail'] } },
  'no work size': { opts: { workSize: 1e6 } },
  'bilinear warp': { tuning: { kernel: 'bilinear' } },
  'shape 0': { tuning: { shape: 0 } },
  'forehead 0.1': { tuning: { forehead: 0.1 } },
  'erode 0.01 feather 0.03': { tuning: { erode: 0.01, feather: 0.03 } },
  'bare warp': {
    opts: { colorCorrection: false, blend: 'feather', occlusion: false },
    tuning: { skip: ['redeye', 'hairFill', 'detail', 'mouthHole'] },
  },
};

interface Face {
  name: string;
  image: RgbImage;
  box: Box;
  /** The job's refined landmarks (what the swap gets). */
  lm: Point[];
  /** Landmarks as the sheet measures them (detectLandmarks on the box). */
  measured: Point[];
  before: number;
}

const dec = (b: Uint8Array) => decodeImage(b, 'x', 1e8);

function interOcular(lm: readonly Point[]): number {
  const c = (a: number, b: number) =>
    lm.slice(a, b).reduce((s, p) => ({ x: s.x + p.x / (b - a), y: s.y + p.y / (b - a) }), { x: 0, y: 0 });
  const l = c(36, 42);
  const r = c(42, 48);
  return Math.hypot(l.x - r.x, l.y - r.y);
}

function landmarkError(a: readonly Point[], b: readonly Point[]): number {
  let s = 0;
  for (let i = 0; i < 68; i++) s += Math.hypot(a[i]!.x - b[i]!.x, a[i]!.y - b[i]!.y);
  return s / 68 / interOcular(a);
}

async function prepare(selfOnly: boolean) {
  const srcImg = await dec(await sheetSource());
  const srcLm = await largestFaceLandmarks(srcImg, await findLargeFaces(srcImg, 0.5));
  const srcDesc = await computeDescriptor(srcImg, srcLm);
  const refined = await refineLandmarks(srcImg, srcLm);
  const src = await levelled(srcImg, refined, extendForehead(refined, DEFAULT_TUNING.forehead), refineLandmarks);
  const faces: Face[] = [];
  for (const t of await sheetTargets()) {
    if (selfOnly && t.name !== 'sample6') continue;
    const image = await dec(t.bytes);
    for (const [index, f] of leftToRight(await findFaces(image, t.confidence)).entries()) {
      if (Math.max(f.box.width, f.box.height) < 100) continue;
      const measured = await detectLandmarks(image, f.box);
      const before = descriptorDistance(srcDesc, await computeDescriptor(image, measured));
      if (selfOnly && before > 0.3) continue;
      const lm = await refineLandmarks(image, measured);
      faces.push({ name: `${t.name} face ${index}`, image, box: f.box, lm, measured, before });
    }
  }
  return { src, srcDesc, faces };
}

type Prepared = Awaited<ReturnType<typeof prepare>>;

async function runConfig(p: Prepared, c: Config) {
  const opts: SwapOptions = { blend: 'poisson', colorCorrection: true, ...c.opts };
  const tuning: SwapTuning = { ...DEFAULT_TUNING, ...c.tuning };
  const rows: { name: string; before: number; after: number; lmErr: number }[] = [];
  for (const f of p.faces) {
    const res: RgbImage = { ...f.image, data: Uint8Array.from(f.image.data) };
    await swapLevelled(res, f.lm, p.src.image, p.src.lm, opts, refineLandmarks, tuning);
    const lmR = await detectLandmarks(res, f.box);
    const after = descriptorDistance(p.srcDesc, await computeDescriptor(res, lmR));
    rows.push({ name: f.name, before: f.before, after, lmErr: landmarkError(f.measured, lmR) });
  }
  return rows;
}

const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;

function summary(rows: Awaited<ReturnType<typeof runConfig>>): string {
  const self = rows.find((r) => r.before <= 0.3);
  const others = rows.filter((r) => r.before > 0.3);
  const parts = [`self ${self ? `${self.before.toFixed(3)} -> ${self.after.toFixed(3)}` : '-'}`];
  if (others.length > 0) {
    const after = others.map((r) => r.after);
    const worst = others.reduce((a, b) => (b.after > a.after ? b : a));
    parts.push(
      `median ${median(after).toFixed(3)}`,
      `worst ${worst.after.toFixed(3)} (${worst.name})`,
      `< 0.45: ${after.filter((a) => a < 0.45).length}/${others.length}`,
      `farther: ${others.filter((r) => r.after > r.before).length}`,
      `landmarks ${median(others.map((r) => r.lmErr)).toFixed(3)}`,
    );
  }
  return parts.join(', ');
}

const args = process.argv.slice(2);
const selfOnly = args.includes('--self');
const verbose = args.includes('--rows');
const names = args.filter((a) => !a.startsWith('--'));
const chosen = names.length > 0 ? names : Object.keys(CONFIGS);
const prepared = await prepare(selfOnly);
for (const name of chosen) {
  const config = CONFIGS[name] ?? (JSON.parse(name) as Config);
  const rows = await runConfig(prepared, config);
  console.log(`${name.padEnd(24)} ${summary(rows)}`);
  for (const r of verbose ? rows : [])
    console.log(`  ${r.name}: ${r.before.toFixed(3)} -> ${r.after.toFixed(3)}, landmarks ${r.lmErr.toFixed(3)}`);
}
