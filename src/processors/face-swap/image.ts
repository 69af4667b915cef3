import sharp from '../sharp.js';
import { JobError } from '../../errors.js';
import type { OutputFormat } from './options.js';
import type { RgbImage } from './types.js';

/**
 * Decodes an input to oriented 8-bit sRGB. `label` names the input in error messages
 * (e.g. "input.target") so the client knows which file is wrong.
 *
 * The pixel limit is checked from the header before anything is decoded, so a decompression bomb is
 * refused without allocating its pixels; sharp's own limitInputPixels stays on as a second guard.
 */
export async function decodeImage(bytes: Uint8Array, label: string, maxPixels: number): Promise<RgbImage> {
  let width: number | undefined;
  let height: number | undefined;
  try {
    // limitInputPixels is off for the header read so an oversized image gets our message, not sharp's.
    const meta = await sharp(bytes, { limitInputPixels: false }).metadata();
    width = meta.width;
    height = meta.height;
  } catch {
    throw new JobError('invalid_media', `${label}: not a decodable image`);
  }
  if (!width || !height) throw new JobError('invalid_media', `${label}: not a decodable image`);
  if (width * height > maxPixels) {
    throw new JobError(
      'invalid_media',
      `${label}: image is ${width}x${height} (${mp(width * height)} MP), over the ${mp(maxPixels)} MP limit`,
    );
  }
  try {
    const { data, info } = await sharp(bytes, { limitInputPixels: maxPixels, failOn: 'error' })
      .rotate() // apply EXIF orientation: we work (and answer) in the orientation a viewer shows
      .flatten({ background: '#ffffff' }) // transparent pixels become white rather than black
      .toColourspace('srgb')
      .raw({ depth: 'uchar' })
      .toBuffer({ resolveWithObject: true });
    if (info.channels !== 3) throw new Error(`unexpected channel count ${info.channels}`);
    return { data: new Uint8Array(data.buffer, data.byteOffset, data.length), width: info.width, height: info.height };
  } catch (err) {
    if (err instanceof JobError) throw err;
    throw new JobError('invalid_media', `${label}: not a decodable image`);
  }
}

/** Megapixels for messages: two significant digits ("0.06", "2.5", "54"). */
function mp(pixels: number): string {
  const v = pixels / 1e6;
  return v >= 10 ? v.toFixed(0) : String(Number(v.toPrecision(2)));
}

export const CONTENT_TYPES: Record<OutputFormat, string> = {
  jpeg: 'image/jpeg',
  png: 'image/png',
  webp: 'image/webp',
};

export const EXTENSIONS: Record<OutputFormat, string> = { jpeg: 'jpg', png: 'png', webp: 'webp' };

/** Encodes the result. No metadata is copied: the orientation is already applied to the pixels. */
export async function encodeImage(img: RgbImage, format: OutputFormat, quality: number): Promise<Buffer> {
  const s = sharp(img.data, { raw: { width: img.width, height: img.height, channels: 3 } });
  switch (format) {
    case 'jpeg':
      return s.jpeg({ quality, mozjpeg: false, chromaSubsampling: quality >= 90 ? '4:4:4' : '4:2:0' }).toBuffer();
    case 'png':
      return s.png({ compressionLevel: 6 }).toBuffer();
    case 'webp':
      return s.webp({ quality }).toBuffer();
  }
}

/** Resamples a region of an RGB image with sharp (area-averaging when shrinking, so no aliasing). */
export async function resizeRegion(
  img: RgbImage,
  region: { left: number; top: number; width: number; height: number },
  outWidth: number,
  outHeight: number,
): Promise<RgbImage> {
  const { data, info } = await sharp(img.data, { raw: { width: img.width, height: img.height, channels: 3 } })
    .extract(region)
    .resize(outWidth, outHeight, { fit: 'fill', kernel: 'lanczos3' })
    .raw()
    .toBuffer({ resolveWithObject: true });
  return { data: new Uint8Array(data.buffer, data.byteOffset, data.length), width: info.width, height: info.height };
}
