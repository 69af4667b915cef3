import type { Histogram, Registry } from 'prom-client';

/** One label set's buckets (per bucket, not cumulative), sum and count. */
export class Series {
  private readonly counts: number[];
  sum = 0;
  count = 0;

  constructor(
    readonly labels: Readonly<Record<string, string | number>>,
    private readonly bounds: readonly number[],
  ) {
    this.counts = bounds.map(() => 0);
  }

  observe(value: number): void {
    // The first bound the value does not exceed; beyond the last, only +Inf (the count) holds it.
    const b = this.bounds;
    let i = 0;
    while (i < b.length && value > b[i]!) i++;
    if (i < b.length) this.counts[i]!++;
    this.sum += value;
    this.count++;
  }

  zero(): void {
    this.counts.fill(0);
    this.sum = 0;
    this.count = 0;
  }

  /** Cumulative bucket counts, as exposed. */
  cumulative(): number[] {
    let acc = 0;
    return this.counts.map((c) => (acc += c));
  }
}

interface Value {
  value: number;
  labels: Record<string, string | number>;
  metricName: string;
}

/**
 * A histogram whose label sets are Series the caller holds: an observation is a bucket search and
 * two additions, where a prom-client child hashes its labels and allocates on every call (the
 * HTTP hook observes every request). Registered in a prom-client registry and exposed exactly as
 * prom-client exposes a histogram (the same lines, label sets in the order first seen).
 */
export class SeriesHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly all = new Map<string, Series>();

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelNames: readonly string[],
    private readonly bounds: readonly number[],
    registry: Registry,
  ) {
    // The registry reads a metric through get() and reset() only; its type names prom-client's classes.
    registry.registerMetric(this as unknown as Histogram);
  }

  /** The series of one label set (made on first use; keep it, a lookup costs what the cache saves). */
  series(labels: Readonly<Record<string, string | number>>): Series {
    const key = this.labelNames.map((n) => String(labels[n])).join('\u0000');
    let s = this.all.get(key);
    if (!s) {
      s = new Series(labels, this.bounds);
      this.all.set(key, s);
    }
    return s;
  }

  get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Value[] }> {
    const values: Value[] = [];
    for (const s of this.all.values()) {
      const bucket = `${this.name}_bucket`;
      s.cumulative().forEach((value, i) =>
        values.push({ value, labels: { le: this.bounds[i]!, ...s.labels }, metricName: bucket }),
      );
      values.push(
        { value: s.count, labels: { le: '+Inf', ...s.labels }, metricName: bucket },
        { value: s.sum, labels: { ...s.labels }, metricName: `${this.name}_sum` },
        { value: s.count, labels: { ...s.labels }, metricName: `${this.name}_count` },
      );
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values });
  }

  /** Zeroes every series (the callers' series stay valid; prom-client would drop the label sets). */
  reset(): void {
    for (const s of this.all.values()) s.zero();
  }
}
