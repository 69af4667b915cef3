/**
 * Durations of the submit body (`cancel_after`, `retention`, the `Cancel-After` header):
 * `"90s"`, `"5m"`, `"1h30m"`, `"2d"`, or a number of seconds (a JSON number or a digit string).
 */
const UNITS = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1_000 } as const;
const COMPOUND = /^(?:(\d{1,7})d)?(?:(\d{1,7})h)?(?:(\d{1,7})m)?(?:(\d{1,9}(?:\.\d{1,3})?)s)?$/;

/** Milliseconds, or undefined when `raw` is not a duration. */
export function parseSubmitDuration(raw: unknown): number | undefined {
  if (typeof raw === 'number') return Number.isFinite(raw) && raw >= 0 ? Math.round(raw * 1000) : undefined;
  if (typeof raw !== 'string') return undefined;
  const s = raw.trim();
  if (/^\d{1,9}(?:\.\d{1,3})?$/.test(s)) return Math.round(Number(s) * 1000);
  const m = COMPOUND.exec(s);
  if (!m || s === '') return undefined;
  const [, d, h, min, sec] = m;
  return (
    Number(d ?? 0) * UNITS.d +
    Number(h ?? 0) * UNITS.h +
    Number(min ?? 0) * UNITS.m +
    Math.round(Number(sec ?? 0) * UNITS.s)
  );
}

/** `7d`, `1h30m`, `90s`: the shortest spelling of a whole number of seconds. */
export function formatSubmitDuration(ms: number): string {
  let s = Math.round(ms / 1000);
  let out = '';
  for (const [unit, size] of [
    ['d', 86_400],
    ['h', 3_600],
    ['m', 60],
  ] as const) {
    if (s >= size) {
      out += `${Math.floor(s / size)}${unit}`;
      s %= size;
    }
  }
  return s > 0 || out === '' ? `${out}${s}s` : out;
}
