import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import type { JobType } from '../../src/processors/types.js';

const sleepOptions = z.strictObject({
  ms: z.int().min(0).max(600_000).default(0),
  /** Keeps running after abort, to prove a late result is discarded. */
  ignore_abort: z.boolean().default(false),
  fail: z.enum(['none', 'processing_error', 'crash']).default('none'),
  /** Sleeps in this many equal steps, reporting each as progress ("sleeping (2 of 4)", 50 %). */
  steps: z.int().min(0).max(20).default(0),
});

export const runs: string[] = [];

/** A test-only job type: sleeps, then returns a small JSON result. */
export function sleepJobType(): JobType {
  const t: JobType<typeof sleepOptions> = {
    name: 'test-sleep',
    description: 'Test job type: sleeps for `ms`.',
    slots: {},
    models: [{ name: 'v1', description: 'the only model' }],
    options: sleepOptions,
    async run(ctx) {
      ctx.progress('sleeping');
      runs.push(ctx.options.ms.toString());
      if (ctx.options.ignore_abort) await sleep(ctx.options.ms);
      else if (ctx.options.steps) {
        for (let i = 0; i < ctx.options.steps; i++) {
          ctx.progress('sleeping', { current: i, total: ctx.options.steps });
          await sleep(ctx.options.ms / ctx.options.steps, undefined, { signal: ctx.signal });
        }
      } else await sleep(ctx.options.ms, undefined, { signal: ctx.signal });
      if (ctx.options.fail === 'crash') throw new TypeError('boom: a bug in the processor');
      if (ctx.options.fail === 'processing_error') {
        const { JobError } = await import('../../src/errors.js');
        throw new JobError('processing_error', 'the test processor failed on purpose');
      }
      const bytes = Buffer.from(JSON.stringify({ slept: ctx.options.ms }));
      return { bytes, contentType: 'application/json', extension: 'json' };
    },
  };
  return t;
}
