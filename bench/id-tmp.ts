import { detectFaces, descriptorDistance, loadFaceModels } from '../src/processors/face-swap/detect.js';
import { decodeImage } from '../src/processors/face-swap/image.js';
import { runFaceSwap } from '../src/processors/face-swap/pipeline.js';
import { faceSwapOptionsSchema } from '../src/processors/face-swap/options.js';
import { portrait, sample } from '../test/face-swap/fixtures.js';
await loadFaceModels();
const dec = (b: Uint8Array) => decodeImage(b, 'x', 1e9);
const src = await portrait('curlyBlonde');
const sd = (await detectFaces(await dec(src), { descriptors: true }))[0]!.descriptor!;
const hooks = { progress: () => {}, checkAborted: () => {} };
const cases: [string, Buffer, Buffer | undefined][] = [
  ['single sample6', sample(6), undefined],
  ['reference sample4', sample(4), await portrait('sample4third', 0.8)],
];
for (const [name, target, reference] of cases) {
  const c0 = process.cpuUsage();
  const out = await runFaceSwap({ source: src, target, reference, options: faceSwapOptionsSchema.parse({ format: 'png' }), maxPixels: 1e9 } as never, hooks as never);
  const cpu = process.cpuUsage(c0);
  const after = await dec(out.bytes);
  const faces = await detectFaces(after, { descriptors: true });
  const d = faces.map((f) => descriptorDistance(f.descriptor!, sd));
  console.log(name, 'min distance to source', Math.min(...d).toFixed(3), 'cpu ms', ((cpu.user + cpu.system) / 1000).toFixed(0));
}
