import type { JobProgress } from '../contract/api.js';

/** The most a worker's stage text may be (status_detail and progress.stage). */
export const MAX_STAGE_CHARS = 200;

/**
 * A processor's or a worker's report as the contract's `progress` and the human `status_detail`:
 * `{"stage":"swapping faces","percent":34.2,"current":41,"total":120}` and
 * "swapping faces (41 of 120)". The percent is derived from current/total when not given, rounded
 * to 0.1 and kept within 0–100.
 */
export function toProgress(
  stage: string,
  at: { percent?: number | null; current?: number; total?: number } = {},
): { progress: JobProgress; detail: string } {
  const text = stage.slice(0, MAX_STAGE_CHARS);
  const count = (n: number | undefined) =>
    n !== undefined && Number.isFinite(n) && n >= 0 ? Math.floor(n) : undefined;
  const current = count(at.current);
  const total = count(at.total);
  let percent = at.percent ?? (current !== undefined && total ? (100 * current) / total : null);
  if (percent !== null)
    percent = Number.isFinite(percent) ? Math.round(Math.min(100, Math.max(0, percent)) * 10) / 10 : null;
  const progress: JobProgress = {
    stage: text,
    percent,
    ...(current !== undefined ? { current } : {}),
    ...(total !== undefined ? { total } : {}),
  };
  const measure =
    current !== undefined && total !== undefined
      ? ` (${current} of ${total})`
      : percent !== null
        ? ` (${Math.round(percent)}%)`
        : '';
  return { progress, detail: `${text}${measure}`.slice(0, MAX_STAGE_CHARS) };
}
