import { describe, expect, it } from 'vitest';
import { JOB_STATUSES, assertTransitions, canTransition, isTerminal } from '../../src/jobs/states.js';

describe('job state machine', () => {
  it('never lets a terminal state change again', () => {
    for (const from of ['completed', 'failed', 'cancelled'] as const) {
      expect(isTerminal(from)).toBe(true);
      for (const to of JOB_STATUSES) expect(canTransition(from, to), `${from} → ${to}`).toBe(false);
    }
  });

  it('allows exactly the documented moves', () => {
    const allowed = JOB_STATUSES.flatMap((f) =>
      JOB_STATUSES.filter((t) => canTransition(f, t)).map((t) => `${f}→${t}`),
    );
    expect(allowed.sort()).toEqual(
      [
        'queued→processing',
        'queued→cancelled',
        'processing→processing',
        'processing→queued',
        'processing→completed',
        'processing→failed',
        'processing→cancelled',
      ].sort(),
    );
  });

  it('throws on an illegal transition request', () => {
    expect(() => assertTransitions(['queued'], 'completed')).toThrow('illegal job transition queued → completed');
    expect(() => assertTransitions(['queued', 'processing'], 'cancelled')).not.toThrow();
  });
});
