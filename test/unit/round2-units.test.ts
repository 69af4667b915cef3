import { describe, expect, it } from 'vitest';
import { formatSubmitDuration, parseSubmitDuration } from '../../src/jobs/durations.js';
import { toProgress } from '../../src/jobs/progress.js';

describe('submit durations', () => {
  it('reads "90s", "5m", "1h30m", "2d" and seconds, and refuses the rest', () => {
    expect(parseSubmitDuration('90s')).toBe(90_000);
    expect(parseSubmitDuration('5m')).toBe(300_000);
    expect(parseSubmitDuration('1h30m')).toBe(5_400_000);
    expect(parseSubmitDuration('2d')).toBe(172_800_000);
    expect(parseSubmitDuration('1.5s')).toBe(1500);
    expect(parseSubmitDuration(90)).toBe(90_000);
    expect(parseSubmitDuration('90')).toBe(90_000);
    for (const bad of ['', 's', '5 minutes', '1m1h', '-5s', 'Infinity', '1e3', null, true, -1, Number.NaN])
      expect(parseSubmitDuration(bad), String(bad)).toBeUndefined();
  });

  it('writes the shortest spelling', () => {
    expect(formatSubmitDuration(7 * 86_400_000)).toBe('7d');
    expect(formatSubmitDuration(5_400_000)).toBe('1h30m');
    expect(formatSubmitDuration(1000)).toBe('1s');
    expect(formatSubmitDuration(90_000)).toBe('1m30s');
  });
});

describe('progress', () => {
  it('derives the percent from counts, bounds it, and writes the sentence', () => {
    expect(toProgress('swapping faces', { current: 41, total: 120 })).toEqual({
      progress: { stage: 'swapping faces', percent: 34.2, current: 41, total: 120 },
      detail: 'swapping faces (41 of 120)',
    });
    expect(toProgress('denoising', { percent: 142 }).progress.percent).toBe(100);
    expect(toProgress('denoising', { percent: 42.44 })).toEqual({
      progress: { stage: 'denoising', percent: 42.4 },
      detail: 'denoising (42%)',
    });
    expect(toProgress('encoding')).toEqual({ progress: { stage: 'encoding', percent: null }, detail: 'encoding' });
    expect(toProgress('x'.repeat(500)).progress.stage).toHaveLength(200);
  });
});
