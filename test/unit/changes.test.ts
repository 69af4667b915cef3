import { describe, expect, it } from 'vitest';
import { WAITING_FOR_WORKER, isTerminalStatus } from '../../src/contract/api.js';
import { MOVES, attemptsLeft, effectsOf, guardOf, newJob, writesOf, type Change } from '../../src/jobs/moves.js';

const held = { uuid: 'u', lease: 'L', job_type: 't' };

describe('job moves', () => {
  it('lets only the lease holder finish, the owner cancel, and an expired lease recover', () => {
    const finishes: Change[] = [
      { move: 'complete', at: 1, held, result: { key: 'k', contentType: 'image/png', size: 1 } },
      { move: 'fail', at: 1, held, failure: { errorType: 'invalid_media', message: 'm' } },
      { move: 'retry', at: 1, held, attempt: 1, message: 'm' },
      { move: 'handBack', at: 1, held },
    ];
    for (const c of finishes) expect(guardOf(c), c.move).toEqual({ leaseOwner: 'L' });
    expect(guardOf({ move: 'cancel', at: 1, uuid: 'u', owner: 'o' })).toEqual({ owner: 'o' });
    expect(guardOf({ move: 'recover', at: 7, uuid: 'u' })).toEqual({ leaseExpiredBefore: 7 });
    expect(guardOf({ move: 'exhaust', at: 7, uuid: 'u', maxAttempts: 3 })).toEqual({ leaseExpiredBefore: 7 });
    expect(guardOf({ move: 'expireQueued', at: 7, uuid: 'u' })).toEqual({ deadlineBefore: 7 });
  });

  it('clears the lease of every move back to the queue; a hand-back uncounts its attempt', () => {
    const back: Change[] = [
      { move: 'retry', at: 1, held, attempt: 2, message: 'boom' },
      { move: 'handBack', at: 1, held, why: 'handed back at shutdown' },
      { move: 'recover', at: 1, uuid: 'u' },
    ];
    for (const c of back) {
      expect(MOVES[c.move].to).toBe('queued');
      expect(writesOf(c).set).toMatchObject({ lease_owner: null, lease_expires_at: null, progress: null });
      expect(writesOf(c).set.status_detail?.startsWith(WAITING_FOR_WORKER)).toBe(true);
      expect(effectsOf(MOVES[c.move].to, 'u')).toEqual({ outbox: false, signals: [['job-queued', '']] });
    }
    expect(writesOf(back[0]!)).toMatchObject({
      set: { status_detail: 'waiting for a worker (attempt 2 failed: boom)' },
      attempts: undefined,
    });
    expect(writesOf(back[1]!)).toMatchObject({
      set: { status_detail: 'waiting for a worker (handed back at shutdown)' },
      attempts: 'uncount',
    });
  });

  it('writes an error type and message on every move to failed, and finished_at on every terminal one', () => {
    for (const name of ['fail', 'exhaust'] as const) expect(isTerminalStatus(MOVES[name].to)).toBe(true);
    expect(writesOf({ move: 'exhaust', at: 5, uuid: 'u', maxAttempts: 3 }).set).toMatchObject({
      error_type: 'internal_error',
      error_message: 'the worker running this job stopped responding 3 times',
      finished_at: 5,
    });
    expect(effectsOf('cancelled', 'u')).toEqual({
      outbox: true,
      signals: [
        ['job-cancelled', 'u'],
        ['job-finished', 'u'],
      ],
    });
  });

  it('creates a queued job waiting for a worker with no attempt, and counts the claim as one', () => {
    const row = newJob({
      uuid: 'u',
      owner: 'o',
      job_type: 't',
      model: 'm',
      input: '{}',
      webhook: null,
      created_at: 1,
      updated_at: 1,
    });
    expect(row).toMatchObject({ status: 'queued', status_detail: WAITING_FOR_WORKER, attempts: 0, lease_owner: null });
    expect(MOVES.claim).toMatchObject({ detail: 'starting', attempts: 'count' });
    expect(attemptsLeft({ attempts: 2 }, 3)).toBe(true);
    expect(attemptsLeft({ attempts: 3 }, 3)).toBe(false);
  });
});
