import { describe, expect, it } from 'vitest';
import { JOB_STATUSES, TERMINAL_STATUSES } from '../../src/contract/api.js';
import { MOVES, TRANSITIONS, canTransition } from '../../src/jobs/moves.js';

describe('job state machine (derived from the moves)', () => {
  it('never lets a terminal state change again', () => {
    for (const from of TERMINAL_STATUSES) {
      for (const to of JOB_STATUSES) expect(canTransition(from, to), `${from} → ${to}`).toBe(false);
    }
  });

  it('allows exactly the documented moves', () => {
    expect(TRANSITIONS.map(([f, t]) => `${f}→${t}`).sort()).toEqual(
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

  it('keeps the status only of finished jobs (the purge of their data)', () => {
    for (const s of JOB_STATUSES)
      expect(canTransition(s, 'unchanged')).toBe((TERMINAL_STATUSES as readonly string[]).includes(s));
    expect(Object.isFrozen(MOVES) && Object.isFrozen(MOVES.claim)).toBe(true);
  });
});
