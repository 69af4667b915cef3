import fs from 'node:fs';
import path from 'node:path';
import { tempDir } from '../helpers/service.js';

/** Remote job types for the tests, in JOB_TYPES_FILE's shape. */
export const DECLARED = {
  job_types: [
    {
      name: 'test-remote',
      description: 'A remote type with an image slot and an option.',
      slots: { source: { required: true, min: 1, max: 2, accepts: 'image', description: 'The image.' } },
      models: [{ name: 'v1', description: 'The only model.' }],
      options: {
        type: 'object',
        properties: { scale: { type: 'integer', minimum: 1, maximum: 4, default: 2 } },
        additionalProperties: false,
      },
    },
    {
      name: 'test-remote-b',
      description: 'A remote type with no media.',
      models: [{ name: 'v1', description: 'The only model.' }],
      options: {
        type: 'object',
        properties: { text: { type: 'string', maxLength: 100 } },
        additionalProperties: false,
      },
    },
    {
      name: 'test-remote-quick',
      description: 'A remote type with a one-second timeout.',
      models: [{ name: 'v1', description: 'The only model.' }],
      timeout: '1s',
    },
  ],
};

/** Writes DECLARED (or `types`) to a fresh file and returns its path, for JOB_TYPES_FILE. */
export function declaredTypesFile(types: unknown = DECLARED): string {
  const file = path.join(tempDir('mj-types-'), 'job-types.json');
  fs.writeFileSync(file, JSON.stringify(types));
  return file;
}
