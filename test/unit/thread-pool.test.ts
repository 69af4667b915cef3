/** Where a worker thread's module comes from, and which of the process's flags it gets. */
import { describe, expect, it } from 'vitest';
import { loadsTsx, workerBeside } from '../../src/processors/thread-pool.js';

describe('worker threads', () => {
  it('tells a tsx preload from other flags', () => {
    expect(loadsTsx(['--import', 'tsx'])).toBe(true);
    expect(loadsTsx(['--import=tsx'])).toBe(true);
    expect(loadsTsx(['--import', 'file:///app/node_modules/tsx/dist/loader.mjs'])).toBe(true);
    expect(loadsTsx(['--import', './otel.mjs', '--max-old-space-size=512'])).toBe(false);
    expect(loadsTsx([])).toBe(false);
  });

  it('a compiled worker is worker.js beside the module; a TypeScript one is worker.ts with tsx', () => {
    const compiled = workerBeside('file:///app/dist/processors/video/face-swap.js');
    expect(compiled.filename).toBe('file:///app/dist/processors/video/worker.js');
    // vitest's process does not preload tsx, so the thread inherits its flags (no execArgv of its own).
    expect(compiled.execArgv).toEqual(loadsTsx(process.execArgv) ? [] : undefined);
    const ts = workerBeside(import.meta.url);
    expect(ts.filename.endsWith('/test/unit/worker.ts')).toBe(true);
    expect(ts.execArgv).toContain('--import');
  });
});
