import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { SeriesHistogram } from '../../src/series-histogram.js';

describe('SeriesHistogram', () => {
  it('is exposed exactly as a prom-client histogram fed the same observations', async () => {
    const buckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5];
    const labelNames = ['method', 'route', 'status_code'];
    const theirs = new Registry();
    const ours = new Registry();
    const reference = new Histogram({ name: 'h', help: 'latency', labelNames, buckets, registers: [theirs] });
    const histogram = new SeriesHistogram('h', 'latency', labelNames, buckets, ours);
    const sets = [
      { method: 'GET', route: '/api/v1/jobs/:uuid/status', status_code: 200 },
      { method: 'POST', route: '/api/v1/jobs/submit/:jobType', status_code: 400 },
      { method: 'GET', route: 'unmatched', status_code: 404 },
    ];
    // Values on the bounds, between them, beyond the last one, and zero.
    const values = [0, 0.001, 0.0011, 0.3, 1, 5, 5.0001, 42, ...Array.from({ length: 300 }, (_, i) => (i * 0.37) % 6)];
    values.forEach((v, i) => {
      const labels = sets[i % sets.length]!;
      reference.labels(labels).observe(v);
      histogram.series(labels).observe(v);
    });
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });
});
