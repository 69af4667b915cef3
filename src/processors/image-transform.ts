import sharp from './sharp.js';
import { z } from 'zod';
import { JobError } from '../errors.js';
import type { JobType } from './types.js';

export const IMAGE_FORMATS = ['jpeg', 'png', 'webp', 'avif'] as const;
const CONTENT_TYPES = { jpeg: 'image/jpeg', png: 'image/png', webp: 'image/webp', avif: 'image/avif' } as const;
const EXTENSIONS = { jpeg: 'jpg', png: 'png', webp: 'webp', avif: 'avif' } as const;

const options = z.strictObject({
  width: z
    .int()
    .min(1)
    .max(16384)
    .optional()
    .describe('Target width in pixels. With only one of width/height, the other follows the aspect ratio.'),
  height: z.int().min(1).max(16384).optional().describe('Target height in pixels.'),
  fit: z
    .enum(['cover', 'contain', 'fill', 'inside', 'outside'])
    .default('inside')
    .describe('How the image fits both width and height (sharp/CSS object-fit semantics). `inside` never crops.'),
  format: z.enum(IMAGE_FORMATS).default('jpeg').describe('Output format.'),
  quality: z.int().min(1).max(100).default(80).describe('Encoder quality for jpeg, webp and avif (ignored for png).'),
});

/** Resize and re-encode one image with a chosen resampling kernel (sharp/libvips, off the event loop). */
export function createImageTransformJobType(opts: { maxPixels?: number } = {}): JobType<typeof options> {
  const maxPixels = opts.maxPixels ?? 100_000_000;
  return {
    name: 'image-transform',
    description: 'Resize and convert one image. EXIF orientation is applied, metadata is stripped.',
    slots: {
      source: { required: true, min: 1, max: 1, accepts: 'image', description: 'The image to transform.' },
    },
    models: [
      { name: 'lanczos3', description: 'Lanczos resampling, 3 lobes: sharpest, the usual choice.' },
      { name: 'mitchell', description: 'Mitchell-Netravali cubic: softer, fewer ringing artefacts.' },
      { name: 'nearest', description: 'Nearest neighbour: no smoothing, for pixel art.' },
    ],
    options,
    // Decoding, resizing and encoding are one sharp pipeline: the download is the other part.
    stages: { 'downloading media': 0, 'transforming image': 40 },
    async run(ctx) {
      const src = ctx.media.source![0]!;
      const o = ctx.options;
      ctx.progress('transforming image');
      let pipeline = sharp(src.bytes, { limitInputPixels: maxPixels, failOn: 'error' }).rotate();
      if (o.width !== undefined || o.height !== undefined) {
        pipeline = pipeline.resize({ width: o.width, height: o.height, fit: o.fit, kernel: ctx.model as 'lanczos3' });
      }
      pipeline = o.format === 'png' ? pipeline.png() : pipeline.toFormat(o.format, { quality: o.quality });
      let bytes: Buffer;
      try {
        bytes = await pipeline.toBuffer();
      } catch (err) {
        ctx.signal.throwIfAborted();
        throw new JobError(
          'invalid_media',
          `input.source: cannot decode image (${(err as Error).message.split('\n')[0]})`,
        );
      }
      ctx.signal.throwIfAborted();
      ctx.progress('transforming image', { percent: 100 });
      return { bytes, contentType: CONTENT_TYPES[o.format], extension: EXTENSIONS[o.format] };
    },
  };
}
