import type { OcclusionPlanes } from '../../src/processors/face-swap/occlusion.js';

/** Occlusion planes over a 60×60 patch: skin everywhere, `paint` sets the rest. */
export function planes(paint: (p: OcclusionPlanes, x: number, y: number, i: number) => void): OcclusionPlanes {
  const w = 60;
  const h = 60;
  const p: OcclusionPlanes = {
    width: w,
    height: h,
    lab: new Float32Array(w * h * 3),
    nonSkin: new Uint8Array(w * h),
    edge: new Uint8Array(w * h),
    zoneOf: new Uint8Array(w * h),
    inner: new Uint8Array(w * h),
    innerCore: new Uint8Array(w * h),
    size: 60,
  };
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const i = y * w + x;
      p.lab.set([70, 12, 16], i * 3);
      if (x <= 1) p.edge[i] = 1; // the face outline runs down the left side
      if (x >= 20 && x < 58 && y >= 5 && y < 55) p.inner[i] = 1;
      if (x >= 24 && x < 54 && y >= 10 && y < 50) p.innerCore[i] = 1;
      paint(p, x, y, i);
    }
  }
  return p;
}
