import { describe, expect, it } from 'vitest';
import { recoverSchema } from '../../src/http/schemas.js';
import { describeIssues } from '../../src/jobs/submit-schema.js';

/** The 400 message a body gets from a request schema, as the routes build it. */
function messageFor(body: unknown): string {
  const r = recoverSchema.safeParse(body);
  if (r.success) throw new Error('expected a validation error');
  return describeIssues(r.error.issues, body);
}

describe('validation messages in the envelope', () => {
  it('words a bad date-time like every other rule, with an example (not zod\'s "Invalid ISO datetime")', () => {
    expect(messageFor({ since: 'yesterday' })).toBe(
      'since: must be an ISO 8601 date and time, e.g. 2026-01-01T00:00:00Z',
    );
    expect(messageFor({})).toBe('since: is required');
  });
});
