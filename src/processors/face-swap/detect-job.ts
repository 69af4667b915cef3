/**
 * Job type `face-detect` (docs/api.md, Faces): the faces of one image as JSON, left to right, with the
 * same decoding, detector and order as `image-face-swap` and `video-face-swap`, so a client can pick
 * faces by index (`target_face_indices`, `source_face_index`) from its answer.
 */
import '../sharp.js'; // loaded by the main thread before any worker thread (see sharp.ts)
import { z } from 'zod';
import { JobError } from '../../errors.js';
import type { JobType, ProcessorResult, RunContext } from '../types.js';
import { DEFAULT_MAX_PIXELS, minConfidence } from './options.js';
import { createFaceThreadPool, runOnPool, type FaceThreadPool } from './pool.js';

export const FACE_DETECT = 'face-detect';
export const MODEL_FACE_DETECT_V1 = 'ssd-landmarks68-v1';

export const faceDetectOptionsSchema = z.strictObject({
  min_confidence: minConfidence.describe(
    'Face detector score a face needs (0.1-0.99). Use the same value in the swap job whose indices you take from this list.',
  ),
});
export type FaceDetectOptions = z.infer<typeof faceDetectOptionsSchema>;

const px = (what: string) => z.number().describe(`${what}, in pixels of the picture as a viewer shows it`);

/** One face of the answer. Strict: a field the answer has and this schema lacks fails the tests. */
const detectedFaceSchema = z.strictObject({
  index: z.number().int().min(0).describe('Place from the left (0 = leftmost): the index the swaps take.'),
  box: z.strictObject({ x: px('Left'), y: px('Top'), width: px('Width'), height: px('Height') }),
  score: z.number().min(0).max(1).describe('Detector score.'),
  landmarks: z.array(z.array(z.number()).length(2)).length(68).describe('The 68 iBUG landmarks, [x, y].'),
  swappable: z
    .boolean()
    .describe('Whether `image-face-swap` takes this face to replace (false: see `reason`; no source either).'),
  reason: z
    .string()
    .optional()
    .describe(
      'Only when `swappable` is false, why: `profile` (turned too far) or `small` (under 32 px across). ' +
        'More reasons may come; show one you do not know as it is.',
    ),
  usable_as_source: z
    .boolean()
    .describe('Whether `image-face-swap` takes this face as its source (the face put in); false: see `source_reason`.'),
  source_reason: z
    .string()
    .optional()
    .describe(
      'Only when `usable_as_source` is false, why: a `reason` above, or `eyes` (its eyes closed, lowered, ' +
        "squinting or in shadow: they would be stretched over the target's). More reasons may come.",
    ),
  thumbnail: z.string().optional().describe('The face, at most 96 px, as a JPEG `data:` URI.'),
});

/** face-detect's answer (`application/json`), as the OpenAPI document states it. */
export const faceDetectResultSchema = z.strictObject({
  width: z.number().int().describe('Picture width (EXIF orientation applied).'),
  height: z.number().int().describe('Picture height (EXIF orientation applied).'),
  preview: z.string().optional().describe('The picture, at most 640 px, as a JPEG `data:` URI.'),
  faces: z.array(detectedFaceSchema).describe('Every face found, left to right by the centre of its box.'),
});

export interface FaceDetectJobType extends JobType<typeof faceDetectOptionsSchema> {
  warmup(): Promise<void>;
  close(): Promise<void>;
}

export function createFaceDetectJobType(
  opts: { threads?: number; maxPixels?: number; pool?: FaceThreadPool } = {},
): FaceDetectJobType {
  const maxPixels = opts.maxPixels ?? DEFAULT_MAX_PIXELS;
  const threadPool = opts.pool ?? createFaceThreadPool(opts.threads);

  async function run(ctx: RunContext<FaceDetectOptions>): Promise<ProcessorResult> {
    if (ctx.model !== MODEL_FACE_DETECT_V1) throw new Error(`unknown model ${ctx.model} for ${FACE_DETECT}`);
    const options = faceDetectOptionsSchema.parse(ctx.options);
    const first = ctx.media.target?.[0];
    if (!first) throw new JobError('invalid_media', 'input.target: required');
    const target = new Uint8Array(first.bytes);
    ctx.signal.throwIfAborted();
    return runOnPool(
      threadPool,
      ctx,
      { kind: 'detect', input: { target, minConfidence: options.min_confidence, maxPixels } },
      [target.buffer],
    );
  }

  return {
    name: FACE_DETECT,
    description:
      'Finds the faces in the `target` image and answers JSON: the image size and, for each face left to ' +
      'right (`index` 0 is the leftmost), its box, detector score, 68 landmarks and `swappable`: false, ' +
      'with a `reason` (`profile`: turned too far), for a face `image-face-swap` refuses, and ' +
      '`usable_as_source` (with a `source_reason`) for whether it takes the face as its source. The indices are ' +
      'the ones `target_face_indices` and `source_face_index` of the face-swap job types refer to.',
    slots: {
      target: {
        required: true,
        min: 1,
        max: 1,
        accepts: 'image',
        description:
          'The picture to look for faces in (EXIF orientation applied: coordinates are as a viewer shows it).',
      },
    },
    models: [
      {
        name: MODEL_FACE_DETECT_V1,
        description:
          'face-api Tiny Face Detector (two scales; SSD MobileNet v1 when it finds no face) and 68-point ' +
          'landmark net: the detector and order of warp-blend-v1. CPU only.',
      },
    ],
    options: faceDetectOptionsSchema,
    resultSchema: faceDetectResultSchema,
    run,
    warmup: () => threadPool.warmup(),
    close: () => threadPool.close(),
  };
}
