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
import { resizeRegion } from './image.js';
import { MAX_FACES } from './options.js';
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

let tinyLoaded: Promise<void> | undefined;

/**
 * The Tiny Face Detector (video key frames): about 5x faster than SSD MobileNet v1 on this backend,
 * with looser boxes and lower scores. Loaded on first use only, so image jobs never pay for it.
 */
export async function locateFacesTiny(
  img: RgbImage,
  minConfidence: number,
  inputSize = 416,
): Promise<{ box: Box; score: number }[]> {
  const { faceapi } = await loadFaceModels();
  tinyLoaded ??= faceapi.nets.tinyFaceDetector.loadFromDisk(path.join(packageDir('@vladmandic/face-api'), 'model'));
  await tinyLoaded;
  const tensor = toTensor(faceapi, img);
  try {
    const options = new faceapi.TinyFaceDetectorOptions({ inputSize, scoreThreshold: minConfidence });
    const found = await faceapi.nets.tinyFaceDetector.locateFaces(tensor, options);
    return found
      .map((d) => ({ box: { x: d.box.x, y: d.box.y, width: d.box.width, height: d.box.height }, score: d.score }))
      .filter((f) => f.box.width >= 8 && f.box.height >= 8)
      .sort((a, b) => b.box.width * b.box.height - a.box.width * a.box.height);
  } finally {
    tensor.dispose();
  }
}

type Tensor3D = FaceApiModule.tf.Tensor3D;

/** Tensors are made with face-api's re-export of tfjs so their type is the one its nets declare. */
function toTensor(faceapi: FaceApi, img: RgbImage): Tensor3D {
  return faceapi.tf.tensor3d(img.data, [img.height, img.width, 3], 'int32');
}

/** Finds face boxes (no landmarks yet), largest first. */
export async function locateFaces(img: RgbImage, minConfidence: number): Promise<{ box: Box; score: number }[]> {
  const { faceapi } = await loadFaceModels();
  const scale = Math.min(1, DETECT_MAX_SIDE / Math.max(img.width, img.height));
  const small =
    scale < 1
      ? await resizeRegion(
          img,
          { left: 0, top: 0, width: img.width, height: img.height },
          Math.max(1, Math.round(img.width * scale)),
          Math.max(1, Math.round(img.height * scale)),
        )
      : img;
  const sx = img.width / small.width;
  const sy = img.height / small.height;
  const tensor = toTensor(faceapi, small);
  try {
    const options = new faceapi.SsdMobilenetv1Options({ minConfidence, maxResults: MAX_FACES });
    const found = await faceapi.nets.ssdMobilenetv1.locateFaces(tensor, options);
    return found
      .map((d) => ({
        box: { x: d.box.x * sx, y: d.box.y * sy, width: d.box.width * sx, height: d.box.height * sy },
        score: d.score,
      }))
      .filter((f) => f.box.width >= 8 && f.box.height >= 8)
      .sort((a, b) => b.box.width * b.box.height - a.box.width * a.box.height);
  } finally {
    tensor.dispose();
  }
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

/** Convenience for tests and tools: every face with landmarks (and descriptors if asked), largest first. */
export async function detectFaces(
  img: RgbImage,
  opts: { minConfidence?: number; descriptors?: boolean } = {},
): Promise<DetectedFace[]> {
  const found = await locateFaces(img, opts.minConfidence ?? 0.5);
  const faces: DetectedFace[] = [];
  for (const f of found) {
    const landmarks = await detectLandmarks(img, f.box);
    const face: DetectedFace = { ...f, landmarks };
    if (opts.descriptors) face.descriptor = await computeDescriptor(img, landmarks);
    faces.push(face);
  }
  return faces;
}
