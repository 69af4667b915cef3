import { z } from 'zod';
import { BLEND_MODES, FACE_MODES, minConfidence, sourceFaceIndex, targetFaceIndices } from '../face-swap/options.js';

export const VIDEO_FACE_SWAP = 'video-face-swap';
export const VIDEO_FROM_IMAGE_AUDIO = 'video-from-image-audio';
export const MODEL_WARP_BLEND_TRACK_V1 = 'warp-blend-track-v1';
export const MODEL_FFMPEG_V1 = 'ffmpeg-h264-v1';

export const VIDEO_FORMATS = ['mp4', 'webm'] as const;
export type VideoFormat = (typeof VIDEO_FORMATS)[number];

/** Limits from config (MAX_VIDEO_SECONDS, MAX_VIDEO_PIXELS). Frames are limited to 60 per allowed second. */
export interface VideoLimits {
  maxSeconds: number;
  maxPixels: number;
}
export const DEFAULT_VIDEO_LIMITS: VideoLimits = { maxSeconds: 120, maxPixels: 1920 * 1080 };
export const MAX_FPS = 60;

const format = z
  .enum(VIDEO_FORMATS)
  .default('mp4')
  .describe('Output container: `mp4` (H.264 + AAC) or `webm` (VP9 + Opus).');
const quality = z
  .number()
  .int()
  .min(1)
  .max(100)
  .default(80)
  .describe(
    'Video encoder quality, 1-100 (mapped to the constant rate factor; 80 is visually lossless for most footage).',
  );
const maxDuration = z
  .number()
  .positive()
  .optional()
  .describe(
    'Fail (`invalid_media`) rather than process a video longer than this many seconds; at most the service limit.',
  );

export const videoFaceSwapOptionsSchema = z.strictObject({
  faces: z
    .enum(FACE_MODES)
    .optional()
    .describe(
      'Which faces of `target` to replace: `largest` (the biggest face where faces first appear, followed ' +
        'through the video), `all` (every face), or `reference` (the person in the `reference` image). ' +
        'Defaults to `reference` when a `reference` image is given, otherwise `largest`.',
    ),
  target_face_indices: targetFaceIndices.describe(
    'Replace exactly these faces, by their index (left to right, as `face-detect` orders them) on the first ' +
      'frame with a face; they are then followed through the video. Not combinable with `faces` `all`/`reference` ' +
      'or a `reference` image. An index with no face fails the job (`invalid_media`).',
  ),
  source_face_index: sourceFaceIndex.describe(
    'Which face of `source` to put in, by its `face-detect` index (left to right). Default: the largest.',
  ),
  format,
  quality,
  max_duration: maxDuration,
  blend: z.enum(BLEND_MODES).default('poisson').describe('How the new face is merged in: `poisson` or `feather`.'),
  color_correction: z.boolean().default(true).describe("Match the source face's colour to the target's skin."),
  min_confidence: minConfidence.describe('Face detector score a face needs on a key frame (0.1-0.99).'),
  match_threshold: z
    .number()
    .min(0.1)
    .max(1.5)
    .default(0.6)
    .describe(
      'Largest face-descriptor distance still taken as the same person: for `reference`, and to recognise a ' +
        'face that leaves and re-enters the picture.',
    ),
});
export type VideoFaceSwapOptions = z.infer<typeof videoFaceSwapOptionsSchema>;

export const videoFromImageAudioOptionsSchema = z.strictObject({
  format,
  quality,
  max_duration: maxDuration,
  fps: z.number().int().min(1).max(60).default(25).describe('Frame rate of the output video.'),
  width: z
    .number()
    .int()
    .min(16)
    .max(3840)
    .optional()
    .describe(
      "Output width in pixels (even); the height follows the first image's aspect ratio. Default: the first image's width, at most 1920.",
    ),
  waveform: z
    .boolean()
    .default(false)
    .describe('Draw the audio as a moving waveform across the bottom quarter of the picture (an "audiogram").'),
  waveform_color: z
    .string()
    .regex(/^#[0-9a-fA-F]{6}$/)
    .default('#ffffff')
    .describe('Colour of the waveform, `#rrggbb`.'),
});
export type VideoFromImageAudioOptions = z.infer<typeof videoFromImageAudioOptionsSchema>;

/** Quality 1-100 → x264 CRF 40..12, VP9 CRF 55..15 (lower CRF: better and bigger). */
export function crfFor(formatName: VideoFormat, q: number): number {
  return formatName === 'mp4' ? Math.round(40 - (q / 100) * 28) : Math.round(55 - (q / 100) * 40);
}
