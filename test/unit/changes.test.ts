import { describe, expect, it } from 'vitest';
import { MOVES, columnsOf, guardOf, type Change } from '../../src/jobs/changes.js';
import { canTransition, isTerminal } from '../../src/jobs/states.js';

const held = { uuid: 'u', lease: 'L', job_type: 't' };

describe('job changes', () => {
  it('describes only moves the transition table allows', () => {
    for (const [name, move] of Object.entries(MOVES)) {
      for (const from of move.from) expect(canTransition(from, move.to), `${name}: ${from} → ${move.to}`).toBe(true);
    }
  });

  it('lets only the lease holder finish, the owner cancel, and an expired lease recover', () => {
    const finishes: Change[] = [
      { move: 'complete', at: 1, held, result: { key: 'k', contentType: 'image/png', size: 1 } },
      { move: 'fail', at: 1, held, failure: { errorType: 'invalid_media', message: 'm' } },
      { move: 'retry', at: 1, held, detail: 'd' },
      { move: 'handBack', at: 1, held, attempts: 1, detail: 'd' },
    ];
    for (const c of finishes) expect(guardOf(c), c.move).toEqual({ leaseOwner: 'L' });
    expect(guardOf({ move: 'cancel', at: 1, uuid: 'u', owner: 'o' })).toEqual({ owner: 'o' });
    expect(guardOf({ move: 'recover', at: 7, uuid: 'u' })).toEqual({ leaseExpiredBefore: 7 });
    expect(guardOf({ move: 'exhaust', at: 7, uuid: 'u', maxAttempts: 3 })).toEqual({ leaseExpiredBefore: 7 });
  });

  it('clears the lease of every move back to the queue, and a hand-back does not count the attempt', () => {
    const back: Change[] = [
      { move: 'retry', at: 1, held, detail: 'd' },
      { move: 'handBack', at: 1, held, attempts: 2, detail: 'd' },
      { move: 'recover', at: 1, uuid: 'u' },
    ];
    for (const c of back) {
      expect(MOVES[c.move].to).toBe('queued');
      expect(columnsOf(c)).toMatchObject({ lease_owner: null, lease_expires_at: null });
    }
    expect(columnsOf(back[1]!)).toMatchObject({ attempts: 1 });
    expect(columnsOf(back[0]!)).not.toHaveProperty('attempts');
  });

  it('writes an error type and message on every move to failed', () => {
    for (const name of ['fail', 'exhaust'] as const) expect(isTerminal(MOVES[name].to)).toBe(true);
    expect(columnsOf({ move: 'exhaust', at: 1, uuid: 'u', maxAttempts: 3 })).toMatchObject({
      error_type: 'internal_error',
      error_message: 'the worker running this job stopped responding 3 times',
    });
  });
});
