import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ACTIVE_STATUSES, ERROR_TYPES, JOB_STATUSES, SLOT_NAMES, TERMINAL_STATUSES } from '../../src/contract/api.js';
import { EVENT_TYPES } from '../../src/contract/webhook.js';

const PYTHON = process.env.MJ_TEST_PYTHON ?? 'python3';
const PACKAGE = fileURLToPath(new URL('../../clients/python', import.meta.url));

/** The Python client's lists, as its own modules define them (standard library only: no venv needed). */
const script = `
import json, typing
from media_jobs import types, worker
print(json.dumps({
  "JOB_STATUSES": list(typing.get_args(types.JobStatus)),
  "ACTIVE_STATUSES": list(types.ACTIVE_STATUSES),
  "TERMINAL_STATUSES": list(types.TERMINAL_STATUSES),
  "SLOT_NAMES": list(types.SLOT_NAMES),
  "EVENT_TYPES": list(types.EVENT_TYPES),
  "ERROR_TYPES": list(types.ERROR_TYPES),
  "worker.SLOTS": list(worker.SLOTS),
  "worker.ERROR_TYPES": list(worker.ERROR_TYPES),
}))
`;

describe('the Python client against the contract', () => {
  const run = spawnSync(PYTHON, ['-c', script], { cwd: PACKAGE, encoding: 'utf8' });
  const missing = run.error !== undefined;
  if (missing) console.log(`python contract check skipped: ${PYTHON} is not installed`);

  it.skipIf(missing)('repeats every list of the contract word for word', () => {
    expect(run.status, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({
      JOB_STATUSES,
      ACTIVE_STATUSES,
      TERMINAL_STATUSES,
      SLOT_NAMES,
      EVENT_TYPES,
      ERROR_TYPES,
      'worker.SLOTS': SLOT_NAMES,
      'worker.ERROR_TYPES': ERROR_TYPES,
    });
  });
});
