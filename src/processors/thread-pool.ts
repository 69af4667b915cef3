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
 * worker.js, and the thread gets the process's flags without a TypeScript loader (a tsx-run script
 * using the build, like the video bench, would otherwise load tsx into every thread: ~25 MB each).
 * Run from TypeScript (vitest, tsx, bench) it is worker.ts, and the worker thread needs tsx's
 * loader to import it.
 */
export function workerBeside(moduleUrl: string): WorkerLocation {
  if (moduleUrl.endsWith('.ts')) {
    const tsx = pathToFileURL(createRequire(moduleUrl).resolve('tsx')).href;
    // --cpu-prof flags pass through, so `node --cpu-prof` profiles the worker threads too.
    const prof = process.execArgv.filter((a) => a.startsWith('--cpu-prof'));
    return { filename: new URL('./worker.ts', moduleUrl).href, execArgv: [...prof, '--import', tsx] };
  }
  return { filename: new URL('./worker.js', moduleUrl).href, execArgv: withoutTsLoader(process.execArgv) };
}

/** `args` without `--import tsx` (any spelling of it: `--import=…`, a resolved path to tsx). */
export function withoutTsLoader(args: readonly string[]): string[] {
  const isTsx = (spec: string) => spec === 'tsx' || /[/\\]tsx[/\\]|^tsx[/\\]/.test(spec);
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '--import' && isTsx(args[i + 1] ?? '')) {
      i++;
      continue;
    }
    if (a.startsWith('--import=') && isTsx(a.slice('--import='.length))) continue;
    out.push(a);
  }
  return out;
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
    /** Starts every thread and lets it load its models (before the first job, not during it). */
    async warmup(): Promise<void> {
      const p = get();
      await Promise.all(Array.from({ length: threads }, () => p.run(warmupTask)));
    },
    async close(): Promise<void> {
      const p = pool;
      pool = undefined;
      await p?.destroy();
    },
  };
}
