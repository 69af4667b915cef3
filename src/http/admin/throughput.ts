const MINUTE = 60_000;

export interface MinutePoint {
  minute: string;
  finished: number;
}

/**
 * Finished jobs per minute over the last hour, oldest first, the current (partial) minute last,
 * from the cluster's per-minute counts (Unix minute → jobs; store/totals.ts `finishedPerMinute`,
 * kept by database triggers, so every process shows the same figures and they survive restarts).
 */
export function minuteSeries(counts: ReadonlyMap<number, number>, at: number): MinutePoint[] {
  const current = Math.floor(at / MINUTE);
  const out: MinutePoint[] = [];
  for (let m = current - 59; m <= current; m++) {
    out.push({ minute: new Date(m * MINUTE).toISOString(), finished: counts.get(m) ?? 0 });
  }
  return out;
}

/** The minutes `minuteSeries(…, at)` covers, as Unix minutes [from, to]. */
export function lastHour(at: number): [number, number] {
  const current = Math.floor(at / MINUTE);
  return [current - 59, current];
}
