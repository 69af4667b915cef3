import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import type { ResourceLimits } from 'node:worker_threads';
import { Piscina } from 'piscina';

export interface WorkerLocation {
  filename: string;
  execArgv?: string[];
}

/**
 * The worker-thread module beside `moduleUrl` (`./worker`). Compiled (dist/…) it is the sibling
 * worker.js, and the thread inherits the process's flags; but when those load tsx (a tsx-run
 * script using the build, like the video bench), only the profiling flags: the thread has no
 * TypeScript to load, and tsx costs each thread ~25 MB. (An explicit execArgv must not hold
 * process-wide flags such as --max-old-space-size: Worker rejects them.) Run from TypeScript
 * (vitest, tsx, bench) it is worker.ts, and the worker thread needs tsx's loader to import it.
 */
export function workerBeside(moduleUrl: string): WorkerLocation {
  // --cpu-prof flags pass through, so `node --cpu-prof` profiles the worker threads too.
  const prof = process.execArgv.filter((a) => a.startsWith('--cpu-prof'));
  if (moduleUrl.endsWith('.ts')) {
    const tsx = pathToFileURL(createRequire(moduleUrl).resolve('tsx')).href;
    return { filename: new URL('./worker.ts', moduleUrl).href, execArgv: [...prof, '--import', tsx] };
  }
  const compiled = { filename: new URL('./worker.js', moduleUrl).href };
  return loadsTsx(process.execArgv) ? { ...compiled, execArgv: prof } : compiled;
}

/** Whether node flags `args` import tsx (`--import tsx`, `--import=…`, a resolved path to it). */
export function loadsTsx(args: readonly string[]): boolean {
  const isTsx = (spec: string) => spec === 'tsx' || /[/\\]tsx[/\\]|^tsx[/\\]/.test(spec);
  return args.some(
    (a, i) => (a === '--import' && isTsx(args[i + 1] ?? '')) || (a.startsWith('--import=') && isTsx(a.slice(9))),
  );
}

/**
 * `threads` worker threads, created on first use (an API-only process that merely lists job types
 * starts none); threads, and the models they load, live as long as the pool.
 */
export function lazyThreadPool<T, R>(
  location: WorkerLocation,
  threads: number,
  warmupTask: T,
  opts: { resourceLimits?: ResourceLimits } = {},
) {
  let pool: Piscina<T, R> | undefined;
  let warmed: Promise<void> | undefined;
  const get = (): Piscina<T, R> =>
    (pool ??= new Piscina<T, R>({
      ...location,
      minThreads: threads,
      maxThreads: threads,
      concurrentTasksPerWorker: 1,
      idleTimeout: Infinity,
      ...(opts.resourceLimits ? { resourceLimits: opts.resourceLimits } : {}),
    }));
  return {
    get,
    /**
     * Starts every thread and lets it load its models (before the first job, not during it); once
     * per pool, however many job types share it (face-detect and image-face-swap do).
     */
    warmup(): Promise<void> {
      const p = get();
      return (warmed ??= Promise.all(Array.from({ length: threads }, () => p.run(warmupTask))).then(() => undefined));
    },
    async close(): Promise<void> {
      const p = pool;
      pool = undefined;
      warmed = undefined;
      await p?.destroy();
    },
  };
}
