import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ADMIN_URL, postgresReachable } from '../helpers/pg-admin.js';
import { freePort, tempDir } from '../helpers/service.js';

// `migrate` and `serve` against a PostgreSQL database that does not exist (or a server that is
// not there): one line saying what is wrong and what to do, exit 1, no stack trace.
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const pgUp = await postgresReachable();

function run(args: string[], databaseUrl: string) {
  const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(root, 'src/main.ts'), ...args], {
    cwd: root,
    env: { ...process.env, DATABASE_URL: databaseUrl, DATA_DIR: tempDir(), LOG_LEVEL: 'info', HOST: '127.0.0.1' },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe.skipIf(!pgUp)('a database that does not exist', () => {
  const url = new URL(ADMIN_URL);
  const name = `mj_missing_${process.pid}`;
  url.pathname = `/${name}`;
  const user = decodeURIComponent(url.username);

  it.each([['migrate'], ['serve', '--role', 'api'], ['serve', '--role', 'worker'], ['keys', 'list']])(
    '%s %s %s: one line telling how to create it',
    async (...args) => {
      const r = run(
        args.filter((a) => a !== undefined),
        url.toString(),
      );
      expect(r.status).toBe(1);
      const lines = r.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toBe(
        `media-jobs: database "${name}" does not exist on PostgreSQL at ${url.hostname}:${url.port || '5432'}; ` +
          `create it first (createdb -h ${url.hostname} -p ${url.port || '5432'}${user ? ` -U ${user}` : ''} ${name}), then start again`,
      );
      expect(r.stderr).not.toMatch(/\n\s+at /);
      // No "retrying" outage line either: a missing database is not an outage.
      expect(r.stdout).not.toMatch(/unavailable|retrying/);
    },
  );
});

describe('a PostgreSQL server that is not there', () => {
  it('migrate says so in one line', async () => {
    const port = await freePort();
    const r = run(['migrate'], `postgres://postgres@127.0.0.1:${port}/media_jobs`);
    expect(r.status).toBe(1);
    expect(r.stderr.trim()).toBe(
      `media-jobs: PostgreSQL at 127.0.0.1:${port} cannot be reached (ECONNREFUSED): is it running, and is DATABASE_URL's host right?`,
    );
  });
});
