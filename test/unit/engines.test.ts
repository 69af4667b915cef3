import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

// Every installed package (dependencies, dev dependencies and theirs) must run on the Node versions
// package.json promises: otherwise `npm ci` warns EBADENGINE on a machine we say is supported, and
// the package may fail there. Checked against the oldest promised version and this machine's.

const root = fileURLToPath(new URL('../..', import.meta.url));
const promise = (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { engines: { node: string } })
  .engines.node;

interface Found {
  where: string;
  version: string;
  node: string;
}

/** Every package.json under node_modules (nested node_modules and @scopes included). */
function installed(dir: string, out: Found[] = []): Found[] {
  if (!fs.existsSync(dir)) return out;
  for (const name of fs.readdirSync(dir)) {
    if (name.startsWith('.')) continue;
    const p = path.join(dir, name);
    if (name.startsWith('@')) {
      installed(p, out);
      continue;
    }
    const file = path.join(p, 'package.json');
    if (!fs.existsSync(file)) continue;
    let pkg: { version?: string; engines?: { node?: unknown } };
    try {
      pkg = JSON.parse(fs.readFileSync(file, 'utf8')) as typeof pkg;
    } catch {
      continue;
    }
    if (typeof pkg.engines?.node === 'string')
      out.push({ where: path.relative(root, p), version: pkg.version ?? '?', node: pkg.engines.node });
    installed(path.join(p, 'node_modules'), out);
  }
  return out;
}

describe('engines', () => {
  const oldest = semver.minVersion(promise)!.version;
  const targets = [...new Set([oldest, semver.clean(process.version)!])];

  it(`promises a Node range this machine (${process.version}) satisfies`, () => {
    expect(semver.satisfies(process.version, promise)).toBe(true);
  });

  it.each(targets)('every installed package accepts Node %s', (version) => {
    const packages = installed(path.join(root, 'node_modules'));
    expect(packages.length).toBeGreaterThan(100);
    const refusing = packages
      .filter((p) => !semver.satisfies(version, p.node, { includePrerelease: true }))
      .map((p) => `${p.where}@${p.version} wants node ${p.node}`);
    expect(refusing).toEqual([]);
  });

  it('the check itself sees a package that refuses the promise', () => {
    expect(semver.satisfies(oldest, '>=22')).toBe(false);
    expect(semver.satisfies(oldest, '^20.19.0 || >=22.12.0')).toBe(true);
  });
});
