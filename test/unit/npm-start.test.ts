import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { freePort, tempDir, waitFor } from '../helpers/service.js';

// `npm start` runs the build `npm ci` made (prepare): nothing is compiled at start.
const root = fileURLToPath(new URL('../..', import.meta.url));
const MAIN = path.join(root, 'dist/main.js');
const built = fs.existsSync(MAIN);
if (!built) console.log('npm start test skipped: no dist/ (npm run build makes it; npm ci does it too)');

describe.skipIf(!built)('npm start', () => {
  it('starts the built service without compiling anything', async () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    expect(pkg.scripts.start).toBe('node dist/main.js serve');
    const builtAt = fs.statSync(MAIN).mtimeMs;
    const port = await freePort();
    let out = '';
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: String(port),
      DATA_DIR: tempDir(), // SQLite in a fresh directory
      LOG_LEVEL: 'warn',
      WORKER_CONCURRENCY: '0',
    };
    delete env.DATABASE_URL;
    // Its own process group, so the test ends npm and the service it started together.
    const child = spawn('npm', ['start', '--silent'], {
      cwd: root,
      detached: true,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
    try {
      await waitFor(async () => {
        if (child.exitCode !== null) throw new Error(`npm start exited early:\n${out}`);
        try {
          return (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200;
        } catch {
          return false;
        }
      }, 'npm start to answer /readyz');
      expect(out).toContain('No API key existed');
      expect(fs.statSync(MAIN).mtimeMs).toBe(builtAt);
    } finally {
      process.kill(-child.pid!, 'SIGTERM');
      await exited;
    }
  });
});
