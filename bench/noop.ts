import { z } from 'zod';
import type { JobType } from '../src/processors/types.js';

const options = z.strictObject({});
const RESULT = Buffer.from('{"ok":true}');

/** Benchmark-only job type: no media, no work; measures the queue, not a processor. */
export function noopJobType(): JobType {
  const t: JobType<typeof options> = {
    name: 'bench-noop',
    description: 'Benchmark job type: does nothing and returns a tiny JSON result.',
    slots: {},
    models: [{ name: 'v1', description: 'the only model' }],
    options,
    async run() {
      return { bytes: RESULT, contentType: 'application/json', extension: 'json' };
    },
  };
  return t;
}
