/** Where a worker thread's module comes from, and which of the process's flags it gets. */
import { describe, expect, it } from 'vitest';
import { workerBeside, withoutTsLoader } from '../../src/processors/thread-pool.js';

describe('worker threads', () => {
  it('a compiled worker gets the process flags without tsx; a TypeScript one gets tsx', () => {
    expect(withoutTsLoader(['--import', 'tsx', '--max-old-space-size=512'])).toEqual(['--max-old-space-size=512']);
    expect(withoutTsLoader(['--import=tsx', '--import', 'file:///app/node_modules/tsx/dist/loader.mjs'])).toEqual([]);
    // Other preloads stay.
    expect(withoutTsLoader(['--import', './otel.mjs', '--cpu-prof'])).toEqual(['--import', './otel.mjs', '--cpu-prof']);
    const compiled = workerBeside('file:///app/dist/processors/video/face-swap.js');
    expect(compiled.filename).toBe('file:///app/dist/processors/video/worker.js');
    expect(compiled.execArgv).toEqual(withoutTsLoader(process.execArgv));
    const ts = workerBeside(import.meta.url);
    expect(ts.filename.endsWith('/test/unit/worker.ts')).toBe(true);
    expect(ts.execArgv).toContain('--import');
  });
});
