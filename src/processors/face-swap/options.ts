import { z } from 'zod';

/** Name of the job type and of its first model (algorithm + version, so later models can sit beside it). */
export const JOB_TYPE_NAME = 'image-face-swap';
export const MODEL_WARP_BLEND_V1 = 'warp-blend-v1';

/** Default refusal limit for either input image: 40 megapixels (e.g. 7746×5164). */
export const DEFAULT_MAX_PIXELS = 40_000_000;

export const FACE_MODES = ['largest', 'all', 'reference'] as const;
export type FaceMode = (typeof FACE_MODES)[number];

export const OUTPUT_FORMATS = ['jpeg', 'png', 'webp'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

export const BLEND_MODES = ['poisson', 'feather'] as const;
export type BlendMode = (typeof BLEND_MODES)[number];

/**
 * The non-media fields of `input`. Strict, so a misspelt option is a 400 rather than silently ignored.
 * Descriptions feed GET /job-types and the API docs, so they are written for API users.
 */
/** Most faces the detector reports (face-detect's list, and the largest index a mapping can name). */
export const MAX_FACES = 32;

/** `target_face_indices`: distinct indices into face-detect's left-to-right order. */
export const targetFaceIndices = z
  .array(
    z
      .number()
      .int()
      .min(0)
      .max(MAX_FACES - 1),
  )
  .min(1)
  .max(MAX_FACES)
  .refine((a) => new Set(a).size === a.length, 'indices must be distinct')
  .optional();

export const sourceFaceIndex = z
  .number()
  .int()
  .min(0)
  .max(MAX_FACES - 1)
  .optional();

/** The detector's score threshold: one range and default for the swaps and face-detect (same faces, same indices). */
export const minConfidence = z.number().min(0.1).max(0.99).default(0.5);

export const faceSwapOptionsSchema = z.strictObject({
  faces: z
    .enum(FACE_MODES)
    .optional()
    .describe(
      'Which faces of `target` to replace: `largest` (the biggest face), `all` (every face found) or ' +
        '`reference` (the one face that matches the person in the `reference` image). Defaults to ' +
        '`reference` when a `reference` image is given, otherwise `largest`.',
    ),
  target_face_indices: targetFaceIndices.describe(
    'Replace exactly these faces of `target`, by their index in the order `face-detect` reports ' +
      '(left to right by the centre of the face box, 0 = leftmost). Not combinable with `faces` ' +
      '`all`/`reference` or a `reference` image. An index with no face fails the job (`invalid_media`).',
  ),
  source_face_index: sourceFaceIndex.describe(
    'Which face of `source` to put in, by its index in `face-detect` order (left to right). Default: the largest.',
  ),
  format: z.enum(OUTPUT_FORMATS).default('jpeg').describe('Output image format.'),
  quality: z
    .number()
    .int()
    .min(1)
    .max(100)
    .default(90)
    .describe('Encoder quality for `jpeg` and `webp` (1-100); ignored for `png`.'),
  blend: z
    .enum(BLEND_MODES)
    .default('poisson')
    .describe(
      'How the new face is merged into the target: `poisson` (seamless cloning: lighting and colour ' +
        'follow the target at the mask edge) or `feather` (a soft alpha edge only).',
    ),
  color_correction: z
    .boolean()
    .default(true)
    .describe("Match the source face's colour to the target's skin (mean and spread per channel in CIELAB)."),
  min_confidence: minConfidence.describe(
    'Face detector score a face needs to count as a face (0.1-0.99). Lower finds more, and more false, faces.',
  ),
  match_threshold: z
    .number()
    .min(0.1)
    .max(1.5)
    .default(0.6)
    .describe(
      'With `faces: reference`: the largest face-descriptor distance (Euclidean, 128-d) still taken as the ' +
        'same person. 0.6 is the usual face-api threshold; lower is stricter.',
    ),
});

export type FaceSwapOptions = z.infer<typeof faceSwapOptionsSchema>;
