/**
 * Face detection, 68-point landmarks and 128-d descriptors with @vladmandic/face-api on the tfjs WASM
 * backend. Everything (wasm binaries, model weights) is read from the installed packages: nothing is
 * fetched at run time. Models load once per thread (per module instance) and stay loaded.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import type * as FaceApiModule from '@vladmandic/face-api/dist/face-api.node-wasm.js';
import type * as TfModule from '@tensorflow/tfjs';
import type * as TfWasmModule from '@tensorflow/tfjs-backend-wasm';
import { extents, faceSize, overlapArea } from './geometry.js';
import { resizeRegion } from './image.js';
import { MAX_FACES } from './options.js';
import { installFastTinyForward, tinyDetectRect, type TinyLayers, type TinyNet } from './tiny.js';
import type { Box, DetectedFace, Point, RgbImage } from './types.js';

const require = createRequire(import.meta.url);

type FaceApi = typeof FaceApiModule;
type Tf = typeof TfModule;

/** The detector (SSD MobileNet v1) works on 512x512 anyway; a larger input only costs resize time. */
const DETECT_MAX_SIDE = 1024;
/** The landmark net sees 112x112; a crop up to twice that keeps detail without big tensors. */
const LANDMARK_MAX_SIDE = 224;
/** The recognition net's input size. */
const DESCRIPTOR_SIDE = 150;

interface Runtime {
  faceapi: FaceApi;
  tf: Tf;
}

let runtime: Promise<Runtime> | undefined;

/** Directory of an installed package, found through Node's resolution (never relative to the cwd). */
function packageDir(name: string): string {
  return path.dirname(require.resolve(`${name}/package.json`));
}

/**
 * A demo photo of the installed face-api package (`sample1.jpg` … `sample6.jpg`, MIT): the warm-up's
 * real faces, and the tests' and benchmarks' pictures.
 */
export function faceApiDemoPhoto(name: string): string {
  return path.join(packageDir('@vladmandic/face-api'), 'demo', name);
}

/** Loads tfjs-wasm and the three face-api nets once; later calls share the same promise. */
export function loadFaceModels(): Promise<Runtime> {
  runtime ??= (async () => {
    // The CommonJS builds are required (not imported) so face-api and we share one tfjs instance.
    const tf = require('@tensorflow/tfjs') as Tf;
    const wasm = require('@tensorflow/tfjs-backend-wasm') as typeof TfWasmModule;
    const faceapi = require('@vladmandic/face-api/dist/face-api.node-wasm.js') as FaceApi;
    // Without the second argument (usePlatformFetch) emscripten reads the .wasm with fs; with it,
    // tfjs would call fetch() on a file path, which Node's fetch refuses.
    wasm.setWasmPaths(path.join(packageDir('@tensorflow/tfjs-backend-wasm'), 'dist') + path.sep);
    if (!(await tf.setBackend('wasm'))) throw new Error('tfjs wasm backend failed to initialise');
    await tf.ready();
    const modelDir = path.join(packageDir('@vladmandic/face-api'), 'model');
    await faceapi.nets.ssdMobilenetv1.loadFromDisk(modelDir);
    await faceapi.nets.faceLandmark68Net.loadFromDisk(modelDir);
    await faceapi.nets.faceRecognitionNet.loadFromDisk(modelDir);
    return { faceapi, tf };
  })();
  // A failed load must not poison the thread forever: the next job retries.
  runtime.catch(() => {
    runtime = undefined;
  });
  return runtime;
}

let tinyLoaded: Promise<{ net: TinyNet; layers: TinyLayers }> | undefined;

/** The Tiny Face Detector, loaded (with the fast forward pass) on first use. */
async function tinyNet(): Promise<{ net: TinyNet; layers: TinyLayers }> {
  const { faceapi } = await loadFaceModels();
  tinyLoaded ??= (async () => {
    const net = faceapi.nets.tinyFaceDetector;
    await net.loadFromDisk(path.join(packageDir('@vladmandic/face-api'), 'model'));
    return { net, layers: installFastTinyForward(faceapi, net) };
  })();
  tinyLoaded.catch(() => {
    tinyLoaded = undefined;
  });
  return tinyLoaded;
}

/**
 * The smallest input the Tiny detector is given unpadded (tiny.ts tinyDetectRect) rather than padded
 * square. At 512 and 416 a third or more of face-api's pass is padding, and on 27 pictures (the
 * sheet's targets, the portraits at two sizes, the bench's target, four 720p frames) findFaces
 * returns the same boxes and scores either way; at 224 the net's receptive field spans the whole
 * picture, the padding moves boxes, scores and which face is borderline, for ~4 ms.
 */
const RECT_MIN_INPUT = 416;

/**
 * The Tiny Face Detector (video key frames): about 5x faster than SSD MobileNet v1 on this backend,
 * with looser boxes and lower scores. Loaded on first use only.
 */
export async function locateFacesTiny(
  img: RgbImage,
  minConfidence: number,
  inputSize = 416,
): Promise<{ box: Box; score: number }[]> {
  const { faceapi } = await loadFaceModels();
  const { net, layers } = await tinyNet();
  // Shrunk to the net's input first (area-averaged by sharp): face-api would pad a whole video
  // frame to a square of int32 and resize it bilinearly, tens of MB of tensors per call.
  const { small, sx, sy } = await shrinkTo(img, inputSize);
  const found =
    Math.max(small.width, small.height) === inputSize && inputSize >= RECT_MIN_INPUT
      ? await tinyDetectRect(faceapi, net, layers, small, minConfidence)
      : await tinySquare(faceapi, net, small, minConfidence, inputSize);
  return found
    .map((d) => ({ box: scaleBox(d.box, sx, sy), score: d.score }))
    .filter((f) => f.box.width >= 8 && f.box.height >= 8)
    .sort(largestFirst);
}

/** A picture smaller than the net's input, through face-api (which pads it square and enlarges it). */
async function tinySquare(faceapi: FaceApi, net: TinyNet, img: RgbImage, scoreThreshold: number, inputSize: number) {
  const tensor = toTensor(faceapi, img);
  try {
    const found = await net.locateFaces(tensor, new faceapi.TinyFaceDetectorOptions({ inputSize, scoreThreshold }));
    return found.map((d) => ({
      box: { x: d.box.x, y: d.box.y, width: d.box.width, height: d.box.height },
      score: d.score,
    }));
  } finally {
    tensor.dispose();
  }
}

const largestFirst = (a: { box: Box }, b: { box: Box }) => b.box.width * b.box.height - a.box.width * a.box.height;

type Tensor3D = FaceApiModule.tf.Tensor3D;

/** Tensors are made with face-api's re-export of tfjs so their type is the one its nets declare. */
function toTensor(faceapi: FaceApi, img: RgbImage): Tensor3D {
  return faceapi.tf.tensor3d(img.data, [img.height, img.width, 3], 'int32');
}

/** `img` shrunk (area-averaged) so its longer side is at most `maxSide`, with the factors back. */
async function shrinkTo(img: RgbImage, maxSide: number): Promise<{ small: RgbImage; sx: number; sy: number }> {
  const k = Math.min(1, maxSide / Math.max(img.width, img.height));
  if (k === 1) return { small: img, sx: 1, sy: 1 };
  const small = await resizeRegion(
    img,
    { left: 0, top: 0, width: img.width, height: img.height },
    Math.max(1, Math.round(img.width * k)),
    Math.max(1, Math.round(img.height * k)),
  );
  return { small, sx: img.width / small.width, sy: img.height / small.height };
}

const scaleBox = (b: Box, sx: number, sy: number): Box => ({
  x: b.x * sx,
  y: b.y * sy,
  width: b.width * sx,
  height: b.height * sy,
});

/**
 * Face boxes from SSD MobileNet v1 (no landmarks yet), largest first. About 350 ms of CPU per image
 * whatever its size (the net always works at 512x512): findFaces uses it only as a fallback.
 */
export async function locateFaces(img: RgbImage, minConfidence: number): Promise<{ box: Box; score: number }[]> {
  const { faceapi } = await loadFaceModels();
  const { small, sx, sy } = await shrinkTo(img, DETECT_MAX_SIDE);
  const tensor = toTensor(faceapi, small);
  try {
    const options = new faceapi.SsdMobilenetv1Options({ minConfidence, maxResults: MAX_FACES });
    const found = await faceapi.nets.ssdMobilenetv1.locateFaces(tensor, options);
    return found
      .map((d) => ({ box: scaleBox(d.box, sx, sy), score: d.score }))
      .filter((f) => f.box.width >= 8 && f.box.height >= 8)
      .sort(largestFirst);
  } finally {
    tensor.dispose();
  }
}

/**
 * The Tiny Face Detector's input sizes for findFaces, each on the image shrunk to that size. 512
 * finds small faces: on face-api's six group photos (1920 px wide, 22 faces SSD finds at 0.5) it
 * finds 21, 416 finds 19 (and one false face), 320 about 16; 608 is no better and costs 40% more.
 * But at 512 Tiny misses most faces that fill half the picture (close-up portraits): a second pass
 * at 224 (~15 ms) finds them. On 44 faces (the group photos, five portraits at two sizes and two
 * JPEG qualities, a close-up) 512 alone finds 30, 512 + 224 finds 40 (no false face; 512 + 256:
 * 37, 512 + 320: 38 and two false faces).
 */
export const FIND_INPUT_SIZES = [512, 224] as const;

/** Two boxes are one face when their overlap covers half of the smaller one. */
function sameFace(a: Box, b: Box): boolean {
  return overlapArea(a, b) > 0.5 * Math.min(a.width * a.height, b.width * b.height);
}

/**
 * Detections of several passes as one list: best score first, a face seen by several passes kept
 * once (its best-scoring box), at most MAX_FACES.
 */
export function mergeDetections<T extends { box: Box; score: number }>(passes: readonly T[][]): T[] {
  const kept: T[] = [];
  for (const f of passes.flat().sort((a, b) => b.score - a.score)) {
    if (kept.length < MAX_FACES && !kept.some((k) => sameFace(k.box, f.box))) kept.push(f);
  }
  return kept;
}

/**
 * How an SSD box sits relative to the Tiny box of the same face, measured on those photos (22 faces
 * both found): SSD's box is the face from brows to chin, Tiny's is wider and reaches lower. Tiny's
 * boxes are mapped to SSD's shape so the landmark net gets the crops it got from SSD (landmarks
 * depend on the crop) and face-detect's boxes keep their meaning. Centre shift as a fraction of the
 * Tiny box's width/height (sd 0.04), size ratios (sd 0.06-0.08).
 */
const TINY_TO_SSD = { dx: 0.017, dy: -0.144, width: 0.673, height: 1.047 } as const;

/** A Tiny Face Detector box in SSD's shape (see TINY_TO_SSD). */
export function ssdShaped(b: Box): Box {
  const width = b.width * TINY_TO_SSD.width;
  const height = b.height * TINY_TO_SSD.height;
  const cx = b.x + b.width * (0.5 + TINY_TO_SSD.dx);
  const cy = b.y + b.height * (0.5 + TINY_TO_SSD.dy);
  return { x: cx - width / 2, y: cy - height / 2, width, height };
}

/**
 * Tiny candidates scoring at least this share of min_confidence (but under it) are borderline: kept
 * only when SSD MobileNet v1 finds the same face at min_confidence. On face-api's six sample photos
 * Tiny gives sample2's profile 0.32 (SSD 0.76) and three false faces 0.23-0.32 (SSD none).
 */
const BORDERLINE = 0.6;

export interface FindOptions {
  /**
   * Only the largest face matters (a swap of the largest face): borderline candidates whose box is
   * not larger than the largest sure face's are dropped unconfirmed (SSD costs ~300 ms).
   */
  largestOnly?: boolean;
}

/**
 * THE face detector of image-face-swap, face-detect and the video tracker's index picking, so face
 * indices mean the same faces in all of them: the Tiny Face Detector at FIND_INPUT_SIZES (about 5x
 * cheaper than SSD), its boxes in SSD's shape. SSD MobileNet v1 (~300 ms) runs only when Tiny finds
 * no sure face or a borderline one (see BORDERLINE); then every face SSD finds is kept too (in SSD's
 * box, with SSD's score), so a face SSD finds is never missed. At most MAX_FACES, largest first.
 */
export async function findFaces(
  img: RgbImage,
  minConfidence: number,
  opts: FindOptions = {},
): Promise<{ box: Box; score: number }[]> {
  const passes: { box: Box; score: number }[][] = [];
  let picture = img;
  for (const size of FIND_INPUT_SIZES) {
    // Each pass shrinks the previous one's picture: area-averaged, never enlarged.
    picture = (await shrinkTo(picture, size)).small;
    const sx = img.width / picture.width;
    const sy = img.height / picture.height;
    const found = await locateFacesTiny(picture, BORDERLINE * minConfidence, size);
    passes.push(found.map((f) => ({ box: ssdShaped(scaleBox(f.box, sx, sy)), score: f.score })));
  }
  const merged = mergeDetections(passes);
  const sure = merged.filter((f) => f.score >= minConfidence);
  const area = (b: Box) => b.width * b.height;
  const worth = opts.largestOnly ? Math.max(0, ...sure.map((f) => area(f.box))) : 0;
  const doubtful = merged.some((f) => f.score < minConfidence && area(f.box) >= worth);
  if (sure.length > 0 && !doubtful) return sure.sort(largestFirst);
  // A face both found keeps SSD's box (the crop the landmark net expects) and score.
  const ssd = await locateFaces(img, minConfidence);
  const tinyOnly = sure.filter((f) => !ssd.some((s) => sameFace(s.box, f.box)));
  return [...ssd, ...tinyOnly].slice(0, MAX_FACES).sort(largestFirst);
}

/**
 * The faces to choose a largest one from (a source or reference picture whose face is not picked by
 * index): the coarse Tiny pass alone (it finds the large faces, ~15 ms), else findFaces. Some 60 ms
 * cheaper than findFaces on a portrait. Largest first.
 */
export async function findLargeFaces(img: RgbImage, minConfidence: number): Promise<{ box: Box; score: number }[]> {
  const size = FIND_INPUT_SIZES[FIND_INPUT_SIZES.length - 1]!;
  const { small, sx, sy } = await shrinkTo(img, size);
  const coarse = await locateFacesTiny(small, minConfidence, size);
  if (coarse.length === 0) return findFaces(img, minConfidence);
  return coarse.map((f) => ({ box: ssdShaped(scaleBox(f.box, sx, sy)), score: f.score })).sort(largestFirst);
}

/**
 * Boxes whose area is within this factor of the largest are too close to call "largest" by box:
 * Tiny's box sides vary by 6-8% around the face (sd, see TINY_TO_SSD), so areas by ~15%.
 */
const LARGEST_BOX_MARGIN = 0.7;

/**
 * The largest face: its landmarks and the box they were found in. Faces whose boxes are too close in size to tell apart are compared
 * by the area their landmarks enclose (faceSize), which does not depend on the detector's box: on
 * the bench's one-face picture the boxes of the 350 px face and of a 260 px face differ by 4%.
 */
export async function largestFace(img: RgbImage, faces: readonly { box: Box }[]): Promise<{ lm: Point[]; box: Box }> {
  const area = (f: { box: Box }) => f.box.width * f.box.height;
  const max = Math.max(...faces.map(area));
  let best: { lm: Point[]; box: Box; size: number } | undefined;
  for (const f of faces.filter((c) => area(c) >= LARGEST_BOX_MARGIN * max)) {
    const lm = await detectLandmarks(img, f.box);
    const size = faceSize(lm);
    if (!best || size > best.size) best = { lm, box: f.box, size };
  }
  if (!best) throw new Error('largestFace: no face');
  return { lm: best.lm, box: best.box };
}

/** The landmarks of largestFace. */
export async function largestFaceLandmarks(img: RgbImage, faces: readonly { box: Box }[]): Promise<Point[]> {
  return (await largestFace(img, faces)).lm;
}

/**
 * Faces in the order face-detect reports and indices refer to: left to right by the centre of the
 * box (top to bottom on a tie), so the order does not depend on sizes or detector scores.
 */
export function leftToRight<T extends { box: Box }>(faces: readonly T[]): T[] {
  const cx = (f: T) => f.box.x + f.box.width / 2;
  const cy = (f: T) => f.box.y + f.box.height / 2;
  return [...faces].sort((a, b) => cx(a) - cx(b) || cy(a) - cy(b));
}

/** Integer crop of `box` clipped to the image (what face-api's extractFaceTensors does). */
function clipBox(img: RgbImage, box: Box): { left: number; top: number; width: number; height: number } {
  const left = Math.max(0, Math.floor(box.x));
  const top = Math.max(0, Math.floor(box.y));
  const right = Math.min(img.width, Math.ceil(box.x + box.width));
  const bottom = Math.min(img.height, Math.ceil(box.y + box.height));
  return { left, top, width: Math.max(1, right - left), height: Math.max(1, bottom - top) };
}

/**
 * Crops `box` at full resolution (shrunk with area averaging when large, rather than letting tfjs
 * bilinear-resize a big crop down to the net's input, which aliases) and returns it with its scale.
 */
async function cropForNet(img: RgbImage, box: Box, maxSide: number, square = false) {
  const region = clipBox(img, box);
  let w = region.width;
  let h = region.height;
  if (square) {
    w = maxSide;
    h = maxSide;
  } else if (Math.max(w, h) > maxSide) {
    const k = maxSide / Math.max(w, h);
    w = Math.max(1, Math.round(w * k));
    h = Math.max(1, Math.round(h * k));
  }
  const crop = await resizeRegion(img, region, w, h);
  return { crop, region, kx: region.width / w, ky: region.height / h };
}

/** 68 landmarks for one detected box, in full-image pixel coordinates. */
export async function detectLandmarks(img: RgbImage, box: Box): Promise<Point[]> {
  const { faceapi } = await loadFaceModels();
  const { crop, region, kx, ky } = await cropForNet(img, box, LANDMARK_MAX_SIDE);
  const tensor = toTensor(faceapi, crop);
  try {
    const lm = (await faceapi.nets.faceLandmark68Net.detectLandmarks(tensor)) as FaceApiModule.FaceLandmarks68;
    return lm.positions.map((p) => ({ x: region.left + p.x * kx, y: region.top + p.y * ky }));
  } finally {
    tensor.dispose();
  }
}

/**
 * SSD's box relative to the landmarks' bounding box (centre offsets and size as fractions of it),
 * medians over the 22 faces of face-api's demo photos: the crop the landmark net was trained on.
 */
const SSD_FROM_LANDMARKS = { cx: 0.011, cy: -0.164, w: 0.941, h: 1.386 } as const;

/**
 * The landmarks again, from a crop placed by the first ones in SSD's shape: the landmark net is
 * sensitive to its crop, and a detector's box (Tiny's, reshaped) is a rougher guess than the face's
 * own landmarks. Used on the faces a swap replaces and puts in, where identity depends on them.
 */
export async function refineLandmarks(img: RgbImage, lm: readonly Point[]): Promise<Point[]> {
  const { x0, y0, x1, y1 } = extents(lm);
  const bw = x1 - x0;
  const bh = y1 - y0;
  const w = SSD_FROM_LANDMARKS.w * bw;
  const h = SSD_FROM_LANDMARKS.h * bh;
  const cx = (x0 + x1) / 2 + SSD_FROM_LANDMARKS.cx * bw;
  const cy = (y0 + y1) / 2 + SSD_FROM_LANDMARKS.cy * bh;
  return detectLandmarks(img, { x: cx - w / 2, y: cy - h / 2, width: w, height: h });
}

function mean(points: Point[]): Point {
  let x = 0;
  let y = 0;
  for (const p of points) {
    x += p.x;
    y += p.y;
  }
  return { x: x / points.length, y: y / points.length };
}

/** face-api's "dlib alignment" box (FaceLandmarks.alignDlib): the crop its recognition net expects. */
export function alignedBox(landmarks: Point[]): Box {
  const leftEye = mean(landmarks.slice(36, 42));
  const rightEye = mean(landmarks.slice(42, 48));
  const mouth = mean(landmarks.slice(48, 68));
  const dist = (a: Point, b: Point) => Math.hypot(a.x - b.x, a.y - b.y);
  const size = Math.floor((dist(mouth, leftEye) + dist(mouth, rightEye)) / 2 / 0.45);
  const c = mean([leftEye, rightEye, mouth]);
  return { x: Math.floor(c.x - 0.5 * size), y: Math.floor(c.y - 0.43 * size), width: size, height: size };
}

/** The 128-d descriptor of a face given its landmarks. Same person: Euclidean distance below ~0.6. */
export async function computeDescriptor(img: RgbImage, landmarks: Point[]): Promise<Float32Array> {
  const { faceapi } = await loadFaceModels();
  const { crop } = await cropForNet(img, alignedBox(landmarks), DESCRIPTOR_SIDE, true);
  const tensor = toTensor(faceapi, crop);
  try {
    return (await faceapi.nets.faceRecognitionNet.computeFaceDescriptor(tensor)) as Float32Array;
  } finally {
    tensor.dispose();
  }
}

export function descriptorDistance(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    s += d * d;
  }
  return Math.sqrt(s);
}

/** Convenience for tests and tools: findFaces with landmarks (and descriptors if asked), largest first. */
export async function detectFaces(
  img: RgbImage,
  opts: { minConfidence?: number; descriptors?: boolean } = {},
): Promise<DetectedFace[]> {
  const found = await findFaces(img, opts.minConfidence ?? 0.5);
  const faces: DetectedFace[] = [];
  for (const f of found) {
    const landmarks = await detectLandmarks(img, f.box);
    const face: DetectedFace = { ...f, landmarks };
    if (opts.descriptors) face.descriptor = await computeDescriptor(img, landmarks);
    faces.push(face);
  }
  return faces;
}
