import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { cycles, floorOf, importGraph, upwardArrows } from '../helpers/import-graph.js';

const SRC = fileURLToPath(new URL('../../src', import.meta.url));

/**
 * The floors of src/, lowest first: a module may import its own floor and the ones below, never
 * one above. The contract and the runtime primitives load nothing of the service, so the client,
 * the worker SDK and the CLI stand on them alone.
 */
const FLOORS = [
  ['contract/'],
  ['runtime/', 'clock.ts', 'log.ts', 'connection-errors.ts', 'errors.ts'],
  ['client/', 'worker-sdk/'],
  ['signals.ts', 'store/'],
  ['storage/', 'media/', 'config.ts', 'metrics.ts', 'series-histogram.ts'],
  ['processors/'],
  ['webhooks/'],
  ['jobs/'],
  ['worker/', 'remote/', 'operator.ts'],
  ['http/', 'cli/'],
  ['app.ts', 'main.ts', 'index.ts'],
] as const;

describe('import structure of src/', () => {
  const graph = importGraph(SRC);

  it('puts every module on a floor', () => {
    for (const m of graph.keys()) expect(() => floorOf(FLOORS, m), m).not.toThrow();
  });

  it('has no arrow running back up a floor', () => {
    expect(upwardArrows(graph, FLOORS)).toEqual([]);
  });

  it('has no circle, type-only imports included', () => {
    expect(cycles(graph)).toEqual([]);
  });

  it('finds circles and upward arrows when there are some (the check itself)', () => {
    const g = new Map([
      ['contract/a.ts', ['jobs/b.ts']],
      ['jobs/b.ts', ['contract/a.ts']],
    ]);
    expect(cycles(g)).toEqual([['contract/a.ts', 'jobs/b.ts']]);
    expect(upwardArrows(g, FLOORS)).toEqual(['contract/a.ts -> jobs/b.ts']);
  });
});
