import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPENAPI_PATH } from '../../src/http/routes/docs.js';
import { startService, tempDir, type TestService } from '../helpers/service.js';

// The served document through two linters nobody here wrote, at their stock rule sets: Redocly
// (`recommended`) and Spectral (`spectral:oas`), both at zero errors and zero warnings. Both run
// from node_modules, offline (no telemetry, no update check).
const run = promisify(execFile);
const bin = (name: string) => path.resolve('node_modules/.bin', name);
const OFFLINE = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' };

let svc: TestService;
let dir: string;
let file: string;
beforeAll(async () => {
  svc = await startService({ WORKER_CONCURRENCY: '0' });
  dir = tempDir('mj-openapi-lint-');
  file = path.join(dir, 'openapi.json');
  const res = await fetch(`${svc.base}${OPENAPI_PATH}`);
  expect(res.status).toBe(200);
  fs.writeFileSync(file, await res.text());
});
afterAll(async () => {
  await svc?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/** A linter's JSON report; it exits non-zero when it finds problems, and the report says which. */
async function report(cmd: string, args: string[]): Promise<string> {
  try {
    return (await run(bin(cmd), args, { env: OFFLINE, cwd: dir, maxBuffer: 64 * 1024 * 1024 })).stdout;
  } catch (err) {
    const out = (err as { stdout?: string }).stdout;
    if (out) return out;
    throw err;
  }
}

describe('OpenAPI lint', () => {
  it('Redocly (recommended): 0 errors, 0 warnings', async () => {
    const out = JSON.parse(await report('redocly', ['lint', file, '--extends', 'recommended', '--format', 'json'])) as {
      totals: { errors: number; warnings: number };
      problems: Array<{ ruleId: string; message: string; location: Array<{ pointer: string }> }>;
    };
    const problems = out.problems.map((p) => `${p.ruleId} at ${p.location[0]?.pointer}: ${p.message}`);
    expect(problems).toEqual([]);
    expect(out.totals).toMatchObject({ errors: 0, warnings: 0 });
  });

  it('Spectral (spectral:oas): no problems of any severity', async () => {
    fs.writeFileSync(path.join(dir, '.spectral.yaml'), 'extends: ["spectral:oas"]\n');
    const out = await report('spectral', [
      'lint',
      file,
      '--ruleset',
      path.join(dir, '.spectral.yaml'),
      '--format',
      'json',
      '--fail-severity',
      'hint',
    ]);
    // The JSON report, then (on success) a line of prose.
    const results = JSON.parse(out.slice(0, out.lastIndexOf(']') + 1)) as Array<{
      code: string;
      message: string;
      path: string[];
    }>;
    expect(results.map((r) => `${r.code} at ${r.path.join('.')}: ${r.message}`)).toEqual([]);
  });
});
