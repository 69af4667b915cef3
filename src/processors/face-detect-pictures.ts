/**
 * face-detect's pictures: a small preview of the image and a thumbnail of each face, added to its
 * JSON result as `data:` URIs, so a client (the dashboard's face pickers) can show who is who
 * without loading the submitted URL itself. They come from the bytes the service already fetched
 * under its URL policy and travel inside the result, served from the service's own origin.
 *
 * A wrapper around the job type (the detector itself lives with the face swap): the detection is
 * untouched, its JSON gains `preview` and `faces[i].thumbnail`.
 */
import sharp from './sharp.js';
import type { FaceDetectJobType, FaceDetectOptions } from './face-swap/detect-job.js';
import type { ProcessorResult, RunContext } from './types.js';

/** Longest side of the preview, and of a face thumbnail, in pixels. */
export const PREVIEW_SIZE = 640;
export const THUMBNAIL_SIZE = 96;
/** Room around a face box in its thumbnail (hair, chin), as a fraction of the box. */
const MARGIN = 0.25;

interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}
interface Detection {
  width: number;
  height: number;
  preview?: string;
  faces: Array<{ box: Box; thumbnail?: string }>;
}

const dataUri = (jpeg: Buffer) => `data:image/jpeg;base64,${jpeg.toString('base64')}`;

/** The box grown by MARGIN on each side, in whole pixels within the image. */
function around(box: Box, width: number, height: number) {
  const left = Math.max(0, Math.floor(box.x - box.width * MARGIN));
  const top = Math.max(0, Math.floor(box.y - box.height * MARGIN));
  const right = Math.min(width, Math.ceil(box.x + box.width * (1 + MARGIN)));
  const bottom = Math.min(height, Math.ceil(box.y + box.height * (1 + MARGIN)));
  return { left, top, width: Math.max(1, right - left), height: Math.max(1, bottom - top) };
}

/** Adds the preview and the face thumbnails to a detection of `image` (EXIF orientation applied, as the detector saw it). */
export async function addPictures(detection: Detection, image: Buffer): Promise<Detection> {
  // One decode, oriented as a viewer shows it: the coordinates of the boxes.
  const { data, info } = await sharp(image).rotate().removeAlpha().raw().toBuffer({ resolveWithObject: true });
  const raw = { raw: { width: info.width, height: info.height, channels: info.channels } } as const;
  const jpeg = (s: sharp.Sharp, size: number) =>
    s.resize(size, size, { fit: 'inside', withoutEnlargement: true }).jpeg({ quality: 75, mozjpeg: true }).toBuffer();
  const preview = dataUri(await jpeg(sharp(data, raw), PREVIEW_SIZE));
  const faces = await Promise.all(
    detection.faces.map(async (face) => ({
      ...face,
      thumbnail: dataUri(
        await jpeg(sharp(data, raw).extract(around(face.box, info.width, info.height)), THUMBNAIL_SIZE),
      ),
    })),
  );
  return { ...detection, preview, faces };
}

export function withFacePictures(type: FaceDetectJobType): FaceDetectJobType {
  return {
    ...type,
    description: `${type.description} It also carries \`preview\` (the image, at most ${PREVIEW_SIZE} px) and each face's \`thumbnail\` (at most ${THUMBNAIL_SIZE} px, with some room around the box), as JPEG \`data:\` URIs.`,
    async run(ctx: RunContext<FaceDetectOptions>): Promise<ProcessorResult> {
      const result = await type.run(ctx);
      const image = ctx.media.target?.[0]?.bytes;
      if (!image) return result;
      ctx.signal.throwIfAborted();
      const detection = JSON.parse(result.bytes.toString('utf8')) as Detection;
      return { ...result, bytes: Buffer.from(JSON.stringify(await addPictures(detection, image))) };
    },
  };
}
