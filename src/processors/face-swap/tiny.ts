/**
 * The Tiny Face Detector (face-api's weights) run faster than face-api runs it: a fused forward pass,
 * and a picture that is not square given to the net as it is instead of padded to a square.
 * detect.ts loads the net and calls these; nothing here loads anything.
 */
import type * as FaceApiModule from '@vladmandic/face-api/dist/face-api.node-wasm.js';
import type * as TfModule from '@tensorflow/tfjs';
import { iou } from './geometry.js';
import type { Box, RgbImage } from './types.js';

type FaceApi = typeof FaceApiModule;
type Tf = typeof TfModule;
export type TinyNet = FaceApiModule.TinyFaceDetector;
type Tensor4D = FaceApiModule.tf.Tensor4D;
type Tensor1D = FaceApiModule.tf.Tensor1D;
interface ConvParams {
  filters: Tensor4D;
  bias: Tensor1D;
}
interface SeparableParams {
  depthwise_filter: Tensor4D;
  pointwise_filter: Tensor4D;
  bias: Tensor1D;
}

/** The net's layers from a normalised batch ((rgb - mean) / 255) to its output grid; frees its input. */
export type TinyLayers = (normalised: Tensor4D) => Tensor4D;

/**
 * The Tiny Face Detector's forward pass with the same weights and arithmetic as face-api's
 * (TinyYolov2Base.runMobilenet), about twice as fast on the wasm backend: face-api subtracts the
 * mean colour through a 3-way tf.concat along the channel axis, which this backend runs as a
 * per-element JavaScript loop (55-85 ms of a 140 ms pass at input 512); a broadcast subtraction
 * does the same. Each bias + leaky ReLU (written as five element-wise ops) is fused into its
 * convolution. Outputs agree with face-api's to float rounding (test/face-swap/detect.test.ts).
 * Installed as the net's forwardInput (face-api's square path); also returned for tinyDetectRect.
 */
export function installFastTinyForward(faceapi: FaceApi, net: TinyNet): TinyLayers {
  const tf = faceapi.tf;
  const meanRgb = net.config.meanRgb;
  if (!meanRgb || !net.config.withSeparableConvs || !net.config.isFirstLayerConv2d) {
    throw new Error('unexpected Tiny Face Detector configuration');
  }
  const mean = tf.tensor1d(meanRgb);
  const LEAK = 0.1; // face-api's leaky(): max(x, 0.1 x)
  // face-api's tf types omit tf.fused (the runtime object is @tensorflow/tfjs's, which has it).
  const fusedConv2d = (faceapi.tf as unknown as Tf).fused.conv2d;
  const convLeaky = (x: Tensor4D, filter: Tensor4D, bias: Tensor1D, pad: 'same' | 'valid') =>
    fusedConv2d({
      ...({ x, filter, bias } as unknown as Pick<Parameters<typeof fusedConv2d>[0], 'x' | 'filter' | 'bias'>),
      strides: 1,
      pad,
      activation: 'leakyrelu',
      leakyreluAlpha: LEAK,
    }) as unknown as Tensor4D;
  const separable = (x: Tensor4D, p: SeparableParams) =>
    convLeaky(tf.depthwiseConv2d(x, p.depthwise_filter, 1, 'same'), p.pointwise_filter, p.bias, 'valid');
  // Layer by layer, each freed once the next exists (one tidy around the whole pass kept every
  // layer's output alive to its end: ~60 MB at input 512, and the wasm heap never shrinks).
  const layers: TinyLayers = (normalised) => {
    const p = net.params as unknown as Record<string, (ConvParams & SeparableParams) | undefined>;
    let out = normalised;
    const then = (layer: (x: Tensor4D) => Tensor4D) => {
      const next = tf.tidy(() => layer(out));
      out.dispose();
      out = next;
    };
    then((x) => convLeaky(x, p.conv0!.filters, p.conv0!.bias, 'valid'));
    for (const layer of ['conv1', 'conv2', 'conv3', 'conv4', 'conv5'] as const) {
      then((x) => separable(tf.maxPool(x, [2, 2], [2, 2], 'same'), p[layer]!));
    }
    then((x) => tf.maxPool(x, [2, 2], [1, 1], 'same'));
    if (p.conv6) then((x) => separable(x, p.conv6!));
    if (p.conv7) then((x) => separable(x, p.conv7!));
    then((x) => tf.add(tf.conv2d(x, p.conv8!.filters, 1, 'valid'), p.conv8!.bias));
    return out;
  };
  net.forwardInput = (input, inputSize) =>
    layers(
      tf.tidy(() => {
        const batch = tf.cast(input.toBatchTensor(inputSize, false), 'float32');
        return tf.div(tf.sub(batch, mean), 255);
      }),
    );
  return layers;
}

/** The net's output stride: one grid cell per 32x32 input pixels. */
const CELL = 32;

/**
 * `img` as the net's input, normalised as face-api does it in float32 ((v - mean) / 255), padded at
 * the bottom and right to whole cells with what face-api pads with (0 before normalising).
 */
function rectInput(faceapi: FaceApi, img: RgbImage, meanRgb: readonly number[]): Tensor4D {
  const w = Math.ceil(img.width / CELL) * CELL;
  const h = Math.ceil(img.height / CELL) * CELL;
  const f = Math.fround;
  // Every channel value's normalised float32, once per call (face-api: cast, sub, div, each rounded).
  const table = new Float32Array(256 * 3);
  for (let c = 0; c < 3; c++) for (let v = 0; v < 256; v++) table[c * 256 + v] = f(f(v - f(meanRgb[c]!)) / 255);
  const data = new Float32Array(w * h * 3);
  for (let i = 0; i < w * h; i++) for (let c = 0; c < 3; c++) data[i * 3 + c] = table[c * 256]!;
  const src = img.data;
  for (let y = 0; y < img.height; y++) {
    let o = y * w * 3;
    let s = y * img.width * 3;
    for (let x = 0; x < img.width; x++, o += 3, s += 3) {
      data[o] = table[src[s]!]!;
      data[o + 1] = table[256 + src[s + 1]!]!;
      data[o + 2] = table[512 + src[s + 2]!]!;
    }
  }
  return faceapi.tf.tensor4d(data, [1, h, w, 3]);
}

const sigmoid = (v: number) => 1 / (1 + Math.exp(-v));

/** face-api's nonMaxSuppression: best score first, dropping boxes overlapping a kept one by more than `threshold`. */
function nonMaxSuppression<T extends { box: Box; score: number }>(found: T[], threshold: number): T[] {
  let order = found.map((_, i) => i).sort((a, b) => found[a]!.score - found[b]!.score);
  const kept: T[] = [];
  while (order.length > 0) {
    const best = found[order.pop()!]!;
    kept.push(best);
    order = order.filter((i) => iou(best.box, found[i]!.box) <= threshold);
  }
  return kept;
}

/**
 * Faces on `img` (its pixels, no resizing) with the Tiny Face Detector, decoded as face-api's
 * TinyYolov2 does (extractBoxes, then non-max suppression), but on the picture padded to whole cells
 * rather than to a square: face-api pads a 3:2 picture at input 512 to 512x512, a third of the pass
 * spent on padding (16:9 video frames: 44%). Only the cells near the bottom (or right) edge see less
 * padding below them, so their scores move slightly; the faces found are face-api's
 * (test/face-swap/detect.test.ts). Boxes in `img`'s pixels.
 */
export async function tinyDetectRect(
  faceapi: FaceApi,
  net: TinyNet,
  layers: TinyLayers,
  img: RgbImage,
  scoreThreshold: number,
): Promise<{ box: Box; score: number }[]> {
  const out = layers(rectInput(faceapi, img, net.config.meanRgb!));
  let grid: Float32Array;
  try {
    grid = (await out.data()) as Float32Array;
  } finally {
    out.dispose();
  }
  const [, rows, cols, channels] = out.shape;
  const anchors = net.config.anchors;
  const enc = channels / anchors.length; // 5: x, y, w, h, score
  const found: { box: Box; score: number }[] = [];
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      for (let a = 0; a < anchors.length; a++) {
        const o = ((r * cols + c) * anchors.length + a) * enc;
        const score = sigmoid(grid[o + 4]!);
        if (!(score > scoreThreshold)) continue;
        const w = Math.exp(grid[o + 2]!) * anchors[a]!.x * CELL;
        const h = Math.exp(grid[o + 3]!) * anchors[a]!.y * CELL;
        const x = (c + sigmoid(grid[o]!)) * CELL - w / 2;
        const y = (r + sigmoid(grid[o + 1]!)) * CELL - h / 2;
        found.push({ box: { x, y, width: w, height: h }, score });
      }
    }
  }
  return nonMaxSuppression(found, net.config.iouThreshold);
}
