import { spawn, type SpawnOptions } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import semver from 'semver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/service.js';
import { root } from '../remote/worker-support.js';

/**
 * What another project gets: `npm pack` makes a tarball of only what a user needs (package.json
 * `files`: dist with the dashboard build, bin), and that tarball installs into an empty project
 * from npm's cache alone (offline), where `npx media-jobs --help` runs and the client imports.
 * The consumer copies nothing of ours (no `overrides`): on the oldest Node we support the install
 * prints no EBADENGINE, because every package it installs accepts that Node.
 *
 * Packs the current dist/: build first (`npm run build && npm run build:dashboard`; `npm ci` does).
 */
interface Run {
  code: number | null;
  /** stdout and stderr together, for failure messages. */
  out: string;
  stdout: string;
}

function run(cmd: string, args: string[], opts: SpawnOptions = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
    let out = '';
    let stdout = '';
    p.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      stdout += d.toString();
    });
    p.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    p.on('error', reject);
    p.on('close', (code) => resolve({ code, out, stdout }));
  });
}

/** Every installed package's `engines.node`, nested node_modules included. */
function enginesOf(dir: string, out: Array<{ where: string; node: string }> = []) {
  if (!fs.existsSync(dir)) return out;
  for (const name of fs.readdirSync(dir)) {
    const p = path.join(dir, name);
    if (name.startsWith('.')) continue;
    if (name.startsWith('@')) {
      enginesOf(p, out);
      continue;
    }
    const file = path.join(p, 'package.json');
    if (!fs.existsSync(file)) continue;
    const pkg = JSON.parse(fs.readFileSync(file, 'utf8')) as { engines?: { node?: unknown } };
    if (typeof pkg.engines?.node === 'string') out.push({ where: p, node: pkg.engines.node });
    enginesOf(path.join(p, 'node_modules'), out);
  }
  return out;
}

interface Packed {
  filename: string;
  integrity: string;
  files: Array<{ path: string }>;
}
interface LockEntry {
  dev?: boolean;
  devOptional?: boolean;
  optional?: boolean;
  [k: string]: unknown;
}
interface Manifest {
  name: string;
  version: string;
  license: string;
  bin: Record<string, string>;
  engines: { node: string };
  dependencies: Record<string, string>;
  overrides?: unknown;
}

const dir = tempDir('mj-pack-');
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as Manifest;
let packed: Packed;

beforeAll(async () => {
  for (const built of ['dist/main.js', 'dist/index.js', 'dist/dashboard/index.html']) {
    if (!fs.existsSync(path.join(root, built)))
      throw new Error(`${built} is missing: run \`npm run build && npm run build:dashboard\` first`);
  }
  // --ignore-scripts: `prepare` would rebuild; this packs the build that is there.
  const r = await run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', dir], { cwd: root });
  expect(r.code, r.out).toBe(0);
  packed = (JSON.parse(r.stdout) as Packed[])[0]!;
}, 120_000);

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('npm pack', () => {
  it('holds dist (with the dashboard build), bin and the package files, nothing else', () => {
    const files = packed.files.map((f) => f.path);
    for (const needed of [
      'package.json',
      'README.md',
      'bin/media-jobs.js',
      'dist/main.js',
      'dist/index.js',
      'dist/index.d.ts',
      'dist/worker-sdk/index.js',
      'dist/dashboard/index.html',
    ])
      expect(files, needed).toContain(needed);
    const stray = files.filter(
      (f) => !f.startsWith('dist/') && !f.startsWith('bin/') && !['package.json', 'README.md', 'LICENSE'].includes(f),
    );
    expect(stray).toEqual([]);
  });

  it('is ignored by git, so a pack in the clone leaves nothing untracked', async () => {
    const r = await run('git', ['check-ignore', '-q', packed.filename], { cwd: root });
    expect(r.code, `${packed.filename} is not in .gitignore`).toBe(0);
  });

  it('installs into an empty project offline: npx media-jobs --help runs and the client imports', async () => {
    const project = path.join(dir, 'consumer');
    fs.mkdirSync(project);
    fs.copyFileSync(path.join(dir, packed.filename), path.join(project, packed.filename));
    const spec = `file:${packed.filename}`;
    fs.writeFileSync(
      path.join(project, 'package.json'),
      // Nothing of ours copied: overrides would apply at the root only, so the package needs none.
      JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, dependencies: { 'media-jobs': spec } }),
    );
    // The lockfile npm would write, from ours: the tarball, then our production dependencies at
    // the same places. With it `npm ci --offline` needs nothing but the packages' tarballs in
    // npm's cache (which `npm ci` here filled), no registry metadata. Ours has no overrides, so
    // it is what npm resolves for a consumer too.
    const ours = JSON.parse(fs.readFileSync(path.join(root, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, LockEntry>;
    };
    expect(manifest.overrides, 'a consumer would not get them').toBeUndefined();
    const packages: Record<string, LockEntry> = {
      '': { name: 'consumer', version: '1.0.0', dependencies: { 'media-jobs': spec } },
      'node_modules/media-jobs': {
        version: manifest.version,
        resolved: spec,
        integrity: packed.integrity,
        license: manifest.license,
        dependencies: manifest.dependencies,
        bin: manifest.bin,
        engines: manifest.engines,
      },
    };
    for (const [key, entry] of Object.entries(ours.packages)) {
      if (key === '' || entry.dev) continue;
      const { devOptional, ...rest } = entry;
      packages[key] = devOptional ? { ...rest, optional: true } : rest;
    }
    fs.writeFileSync(
      path.join(project, 'package-lock.json'),
      JSON.stringify({ name: 'consumer', version: '1.0.0', lockfileVersion: 3, requires: true, packages }),
    );
    // Install scripts off: the CLI's --help and the client need no native build.
    const env = { ...process.env, npm_config_update_notifier: 'false' };
    const install = await run('npm', ['ci', '--offline', '--ignore-scripts', '--no-audit', '--no-fund'], {
      cwd: project,
      env,
    });
    expect(install.code, install.out).toBe(0);
    expect(install.out).not.toContain('EBADENGINE');
    expect(fs.existsSync(path.join(project, 'node_modules/media-jobs/src'))).toBe(false);
    // What npm's engine check looks at, on the oldest Node we support and on this one.
    const oldest = semver.minVersion(manifest.engines.node)!.version;
    const refusing = enginesOf(path.join(project, 'node_modules')).filter(
      (p) => ![oldest, process.version].every((v) => semver.satisfies(v, p.node, { includePrerelease: true })),
    );
    expect(refusing).toEqual([]);

    const help = await run('npx', ['--offline', 'media-jobs', '--help'], { cwd: project, env });
    expect(help.code, help.out).toBe(0);
    expect(help.out).toContain('media-jobs serve');
    expect(help.out).toContain('media-jobs worker');

    const script = [
      "import { MediaJobsClient, verifyWebhook } from 'media-jobs';",
      "import { runWorker } from 'media-jobs/worker';",
      "const c = new MediaJobsClient({ baseUrl: 'http://127.0.0.1:9', apiKey: 'k' });",
      'console.log(typeof c.submit, typeof verifyWebhook, typeof runWorker);',
    ].join('\n');
    const imported = await run('node', ['--input-type=module', '-e', script], { cwd: project, env });
    expect(imported.code, imported.out).toBe(0);
    expect(imported.out.trim()).toBe('function function function');
    expect(fs.existsSync(path.join(project, 'node_modules/media-jobs/dist/index.d.ts'))).toBe(true);
  }, 300_000);
});
