/**
 * What each stage of the face swap costs the identity: the contact sheet's swaps (every face >= 100 px
 * of face-api's six sample photos and the rolled ones, from sample6's right-hand woman) run in-process
 * under several configurations, each leaving one stage out or changing one knob. For each it prints
 * the self-swap (the source's own face in sample6, swapped onto itself: a perfect pipeline leaves it
 * where it was) and, over the other faces, the median and worst descriptor distance to the source,
 * how many are under 0.45, how many end farther than the original, the median landmark
 * agreement (result's landmarks vs the target's, over the eye distance), and the same identity read
 * upright (faces rolled more than 15° read in their level frame: the descriptor reads roll as identity).
 *
 *   npx tsx bench/face-swap-ablation.ts [--self] [config ...]     (default: every config below)
 *
 * --self runs the self-swap only (seconds instead of minutes); --only=NAME,NAME (e.g. `sample5 face 3`)
 * swaps only those faces; --rows prints every face; --save=DIR
 * writes each face's original, result and the source's face side by side (PNG, the face's
 * surroundings, the source at the same height) into DIR, to be looked at. --jitter swaps each face
 * twice more with the target's landmarks moved by half a pixel (JITTER, both ways) and prints the
 * spread: the noise a figure carries (the result moves by a fraction of a pixel and its descriptor
 * crop with it; on the sheet a face's upright read moves by up to 0.052, the median by 0.005), so
 * a change smaller than it on one face is not a change. Detection and landmarks are those of the
 * job (findFaces, refineLandmarks, the level frame), computed once and shared by every config; the
 * identity is always read on the landmarks as found.
 */
import { mkdirSync } from 'node:fs';
import sharp from 'sharp';
import {
  computeDescriptor,
  descriptorDistance,
  detectLandmarks,
  refineLandmarks,
} from '../src/processors/face-swap/detect.js';
import { levelled, swapLevelled } from '../src/processors/face-swap/level.js';
import { DEFAULT_TUNING, extendForehead, type SwapOptions, type SwapTuning } from '../src/processors/face-swap/swap.js';
import { extents } from '../src/processors/face-swap/geometry.js';
import type { Box, Point, RgbImage } from '../src/processors/face-swap/types.js';
import { landmarkError, SELF_BEFORE, sheetFaces, sheetSourceFace, uprightDescriptor } from '../test/face-swap/sheet.js';

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
  'no mouth hole': { tuning: { skip: ['mouthHole'] } },
  'no detail': { tuning: { skip: ['detail'] } },
  'no work size': { opts: { workSize: 1e6 } },
  'bilinear warp': { tuning: { kernel: 'bilinear' } },
  'shape 0': { tuning: { shape: 0 } },
  'forehead 0.1': { tuning: { forehead: 0.1 } },
  'erode 0.01 feather 0.03': { tuning: { erode: 0.01, feather: 0.03 } },
  'no outline move': { tuning: { jaw: 0 } },
  'far cheek whole': { tuning: { jawTurn: 0 } },
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

async function prepare(selfOnly: boolean, only?: readonly string[]) {
  const source = await sheetSourceFace();
  const refined = await refineLandmarks(source.image, source.lm);
  const src = await levelled(source.image, refined, extendForehead(refined, DEFAULT_TUNING.forehead), refineLandmarks);
  const faces: Face[] = [];
  for await (const { image, face: f, name } of sheetFaces(selfOnly ? (n) => n === 'sample6' : undefined)) {
    if (only && !only.includes(name)) continue;
    const measured = await detectLandmarks(image, f.box);
    const before = descriptorDistance(source.descriptor, await computeDescriptor(image, measured));
    if (selfOnly && before > SELF_BEFORE) continue;
    const lm = await refineLandmarks(image, measured);
    faces.push({ name, image, box: f.box, lm, measured, before });
  }
  return { src, srcDesc: source.descriptor, faces };
}

type Prepared = Awaited<ReturnType<typeof prepare>>;

/** `box` grown by 0.35 of its larger side, clipped to `im`: a face's surroundings. */
function surroundings(im: RgbImage, box: Box) {
  const g = Math.round(0.35 * Math.max(box.width, box.height));
  const left = Math.max(0, Math.round(box.x - g));
  const top = Math.max(0, Math.round(box.y - g));
  return {
    left,
    top,
    width: Math.min(im.width - left, Math.round(box.width + 2 * g)),
    height: Math.min(im.height - top, Math.round(box.height + 2 * g)),
  };
}

const crop = (im: RgbImage, r: ReturnType<typeof surroundings>) =>
  sharp(im.data, { raw: { width: im.width, height: im.height, channels: 3 } }).extract(r);

/** The face's surroundings in the original and in the result, and the source's face, side by side, as a PNG in `dir`. */
async function savePair(dir: string, file: string, f: Face, res: RgbImage, src: Prepared['src']) {
  const r = surroundings(f.image, f.box);
  const e = extents(src.lm);
  const box = { x: e.x0, y: e.y0, width: e.x1 - e.x0, height: e.y1 - e.y0 };
  const source = await crop(src.image, surroundings(src.image, box)).resize({ height: r.height }).png().toBuffer();
  const sw = (await sharp(source).metadata()).width ?? 0;
  await sharp({ create: { width: r.width * 2 + sw, height: r.height, channels: 3, background: '#000' } })
    .composite([
      { input: await crop(f.image, r).png().toBuffer(), left: 0, top: 0 },
      { input: await crop(res, r).png().toBuffer(), left: r.width, top: 0 },
      { input: source, left: 2 * r.width, top: 0 },
    ])
    .png()
    .toFile(`${dir}/${file}.png`);
}

/** How far (px, along x; half of it along y) --jitter moves the target's landmarks, each way. */
const JITTER = 0.5;

/** One face swapped under `c` with its landmarks moved by (dx, dx / 2): the result and both identity reads. */
async function swapOne(p: Prepared, f: Face, c: Config, dx = 0) {
  const opts: SwapOptions = { blend: 'poisson', colorCorrection: true, ...c.opts };
  const tuning: SwapTuning = { ...DEFAULT_TUNING, ...c.tuning };
  const res: RgbImage = { ...f.image, data: Uint8Array.from(f.image.data) };
  const lm = dx === 0 ? f.lm : f.lm.map((q) => ({ x: q.x + dx, y: q.y + dx / 2 }));
  await swapLevelled(res, lm, p.src.image, p.src.lm, opts, refineLandmarks, tuning);
  const lmR = await detectLandmarks(res, f.box);
  const after = descriptorDistance(p.srcDesc, await computeDescriptor(res, lmR));
  // Read as the sheet reads it: in the level frame of the landmarks as found, whatever the swap got.
  const upright = descriptorDistance(p.srcDesc, await uprightDescriptor(res, f.box, f.lm));
  return { res, lmR, after, upright };
}

async function runConfig(p: Prepared, c: Config, save?: string, jitter = false) {
  const rows: Row[] = [];
  for (const f of p.faces) {
    const { res, lmR, after, upright } = await swapOne(p, f, c);
    const jittered = jitter
      ? [(await swapOne(p, f, c, JITTER)).upright, (await swapOne(p, f, c, -JITTER)).upright]
      : [];
    rows.push({ name: f.name, before: f.before, after, upright, jittered, lmErr: landmarkError(f.measured, lmR) });
    if (save) await savePair(save, f.name.replace(/[^a-z0-9+-]+/gi, '_'), f, res, p.src);
  }
  return rows;
}

interface Row {
  name: string;
  before: number;
  after: number;
  upright: number;
  /** The upright read with the target's landmarks moved by ±JITTER (--jitter), else empty. */
  jittered: number[];
  lmErr: number;
}

/** Largest minus smallest of a face's upright reads (as found and jittered). */
const spread = (r: Row) => Math.max(r.upright, ...r.jittered) - Math.min(r.upright, ...r.jittered);

const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;

function summary(rows: Row[]): string {
  const self = rows.find((r) => r.before <= SELF_BEFORE);
  const others = rows.filter((r) => r.before > SELF_BEFORE);
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
      `read upright: median ${median(others.map((r) => r.upright)).toFixed(3)}, worst ${Math.max(...others.map((r) => r.upright)).toFixed(3)}, < 0.45: ${others.filter((r) => r.upright < 0.45).length}`,
    );
    if (others[0]!.jittered.length > 0) {
      const medians = [0, 1].map((j) => median(others.map((r) => r.jittered[j]!)).toFixed(3));
      parts.push(
        `jittered ±${JITTER} px: medians ${medians.join(', ')}, spread per face median ${median(others.map(spread)).toFixed(3)}, largest ${Math.max(...others.map(spread)).toFixed(3)}`,
      );
    }
  }
  return parts.join(', ');
}

const args = process.argv.slice(2);
const selfOnly = args.includes('--self');
const verbose = args.includes('--rows');
const jitter = args.includes('--jitter');
const saveTo = args.find((a) => a.startsWith('--save='))?.slice('--save='.length);
const only = args
  .find((a) => a.startsWith('--only='))
  ?.slice('--only='.length)
  .split(',');
const names = args.filter((a) => !a.startsWith('--'));
const chosen = names.length > 0 ? names : Object.keys(CONFIGS);
const prepared = await prepare(selfOnly, only);
for (const name of chosen) {
  const config = CONFIGS[name] ?? (JSON.parse(name) as Config);
  const dir = saveTo && `${saveTo}/${name.replace(/[^a-z0-9.]+/gi, '_')}`;
  if (dir) mkdirSync(dir, { recursive: true });
  const rows = await runConfig(prepared, config, dir, jitter);
  console.log(`${name.padEnd(24)} ${summary(rows)}`);
  for (const r of verbose ? rows : []) {
    const moved = r.jittered.length > 0 ? `; jittered ${r.jittered.map((u) => u.toFixed(3)).join(', ')}` : '';
    console.log(
      `  ${r.name}: ${r.before.toFixed(3)} -> ${r.after.toFixed(3)} (upright ${r.upright.toFixed(3)}${moved}), landmarks ${r.lmErr.toFixed(3)}`,
    );
  }
}
