/**
 * A target with (almost) no colour keeps none: into a greyscale copy of a photo, the colour transfer
 * (which moves the source's skin towards the target's, not its eyes, brows or lips) left blue-teal
 * eyes and brows and a bluish cast. Where the target's own face is near grey, the new face's chroma
 * is held to the target's: each pixel moved towards its luma until its spread of channels is no more
 * than the target face's own (its 95th percentile). Coloured targets are left alone.
 */

/** Target faces whose chroma (max - min channel, 95th percentile, 0-255) is at most this count as grey. */
export const GREY_CHROMA = 12;

const chromaOf = (rgb: Float32Array, o: number) =>
  Math.max(rgb[o]!, rgb[o + 1]!, rgb[o + 2]!) - Math.min(rgb[o]!, rgb[o + 1]!, rgb[o + 2]!);

/**
 * The 95th percentile of the chroma of `rgb` (interleaved RGB floats) where `use` is set, to the
 * next whole level (a histogram: one pass, no sort), or undefined when nothing is set.
 */
export function faceChroma(rgb: Float32Array, use: Uint8Array): number | undefined {
  const hist = new Uint32Array(256);
  let n = 0;
  for (let i = 0; i < use.length; i++) {
    if (!use[i]) continue;
    hist[Math.min(255, Math.ceil(chromaOf(rgb, i * 3)))]!++;
    n++;
  }
  if (n === 0) return undefined;
  const rank = Math.floor(0.95 * (n - 1));
  let seen = 0;
  for (let c = 0; c < 256; c++) {
    seen += hist[c]!;
    if (seen > rank) return c;
  }
  return 255;
}

/**
 * Holds the chroma of `face` (interleaved RGB floats, in place) to the target's (`target`, the same
 * region) when the target face (`inside`) is near grey (GREY_CHROMA). Returns the cap applied, or
 * undefined when the target is coloured.
 */
export function keepTargetGrey(face: Float32Array, target: Float32Array, inside: Uint8Array): number | undefined {
  const cap = faceChroma(target, inside);
  if (cap === undefined || cap > GREY_CHROMA) return undefined;
  for (let o = 0; o < face.length; o += 3) {
    const c = chromaOf(face, o);
    if (c <= cap) continue;
    // Towards the pixel's own luma: its brightness stays, its colour shrinks to the cap.
    const y = 0.299 * face[o]! + 0.587 * face[o + 1]! + 0.114 * face[o + 2]!;
    const k = cap / c;
    for (let j = 0; j < 3; j++) face[o + j] = y + k * (face[o + j]! - y);
  }
  return cap;
}
