/**
 * Sources whose eyes do not show (lowered, squinting, in shadow) are refused by name, and face-detect
 * says so, rather than swapped to smeared, black-holed eyes: sample4's third face (index 2), put into
 * sample1's faces, came out with black holes for eyes and lost brows. Good sources still swap.
 */
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobError } from '../../src/errors.js';
import type { FaceDetectJobType } from '../../src/processors/face-swap/detect-job.js';
import type { FaceSwapJobType } from '../../src/processors/face-swap/index.js';
import { media, runContext, sample, faceJobTypes } from './fixtures.js';

const LONG = 240_000;

interface DetectedFlags {
  index: number;
  box: { x: number; y: number };
  swappable: boolean;
  reason?: string;
  usable_as_source: boolean;
  source_reason?: string;
}

describe('image-face-swap sources', { timeout: LONG }, () => {
  let jt: FaceSwapJobType;
  let fd: FaceDetectJobType;
  let close: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    ({ jt, fd, close } = await faceJobTypes());
  }, LONG);

  afterAll(async () => {
    await close?.();
  });

  const detect = async (bytes: Buffer) => {
    const result = await fd.run({
      model: 'ssd-landmarks68-v1',
      options: fd.options.parse({}),
      media: { target: media(bytes) },
      signal: new AbortController().signal,
      progress: () => {},
    });
    return (JSON.parse(result.bytes.toString('utf8')) as { faces: DetectedFlags[] }).faces;
  };

  it('face-detect flags faces whose eyes do not show as no source, and the swap refuses them by name', async () => {
    const faces = await detect(sample(4));
    expect(faces).toHaveLength(4);
    // Face 2 looks down, its eyes lowered and in shadow: a fine target, no source.
    expect(faces[2]).toMatchObject({ swappable: true, usable_as_source: false, source_reason: 'eyes' });
    expect(Object.keys(faces[2]!)).not.toContain('reason');
    for (const i of [0, 1, 3]) {
      expect(faces[i]).toMatchObject({ swappable: true, usable_as_source: true });
      expect(Object.keys(faces[i]!)).not.toContain('source_reason');
    }
    for (const target of [0, 2]) {
      const run = runContext(
        { source: sample(4), target: sample(1) },
        { source_face_index: 2, target_face_indices: [target] },
      );
      const err = await jt.run(run.ctx).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(JobError);
      expect((err as JobError).errorType).toBe('invalid_media');
      const at = `at x ${Math.round(faces[2]!.box.x)}, y ${Math.round(faces[2]!.box.y)}`;
      expect((err as JobError).message).toBe(
        `input.source: face 2 (${at}) does not show its eyes (closed, lowered, squinting or in shadow); ` +
          'use a source photo facing the camera with both eyes open and lit',
      );
    }
  });

  it('flags sample5’s faces with an eye in shadow or narrowed, and no face of the sources that swap well', async () => {
    expect((await detect(sample(5))).map((f) => f.usable_as_source)).toEqual([false, true, true, false, true]);
    // The contact sheet's source (sample6's right-hand woman) and the README example's (sample3's middle one).
    expect((await detect(sample(6))).map((f) => f.usable_as_source)).toEqual([true, true, true, true]);
    expect((await detect(sample(3))).map((f) => f.usable_as_source)).toEqual([true, true, true]);
  });

  it('still swaps a good source into the same targets', async () => {
    const source = await sharp(sample(3)).extract({ left: 896, top: 37, width: 578, height: 578 }).jpeg().toBuffer();
    for (const [src, index] of [
      [sample(6), 3],
      [source, 0],
    ] as const) {
      for (const target of [0, 2]) {
        const run = runContext(
          { source: src, target: sample(1) },
          { source_face_index: index, target_face_indices: [target] },
        );
        expect((await jt.run(run.ctx)).contentType).toBe('image/jpeg');
      }
    }
  });
});
