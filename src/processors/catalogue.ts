import type { JobType } from './types.js';
import os from 'node:os';
import { createFaceSwapJobType } from './face-swap/index.js';
import { createImageTransformJobType } from './image-transform.js';

/** The job types a service runs. Extra types (e.g. a benchmark's no-op) can be passed in. */
export class Catalogue {
  private readonly types = new Map<string, JobType>();

  constructor(types: JobType[]) {
    for (const t of types) {
      if (this.types.has(t.name)) throw new Error(`job type ${t.name} registered twice`);
      this.types.set(t.name, t);
    }
  }

  get(name: string): JobType | undefined {
    return this.types.get(name);
  }

  list(): JobType[] {
    return [...this.types.values()];
  }

  async close(): Promise<void> {
    await Promise.all(this.list().map((t) => t.close?.()));
  }
}

export interface DefaultTypesOptions {
  /** Threads for CPU-heavy types that run in worker threads. */
  threads: number;
}

export function defaultJobTypes(opts: DefaultTypesOptions): JobType[] {
  return [
    createImageTransformJobType() as unknown as JobType,
    // Threads start on the first swap, so API-only processes never load the face models.
    createFaceSwapJobType({ threads: Math.max(1, Math.min(opts.threads, os.availableParallelism())) }) as unknown as JobType,
  ];
}
