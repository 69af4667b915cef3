import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { apiJobSchema } from '../../src/http/schemas.js';

// The README, docs/ and the comments users read stand alone: they never send a reader to a file
// outside the repository (the project's working notes beside the clone are not shipped).

const root = fileURLToPath(new URL('../..', import.meta.url));
const OUTSIDE = [/\.\.\/shared/, /DESIGN\.md/, /DESIGN section/, /shared\/seed/];

function files(dir: string, ext: RegExp): string[] {
  return fs
    .readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => ext.test(f) && !f.includes('node_modules') && !f.includes('__pycache__'))
    .map((f) => path.join(dir, f));
}

const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');
const citing = (list: string[]) =>
  list.flatMap((file) =>
    read(file)
      .split('\n')
      .flatMap((line, i) => (OUTSIDE.some((re) => re.test(line)) ? [`${file}:${i + 1}: ${line.trim()}`] : [])),
  );

describe('documentation stands alone', () => {
  it('README.md and docs/ cite nothing outside the repository', () => {
    expect(citing(['README.md', ...files('docs', /\.md$/), ...files('bench', /\.md$/)])).toEqual([]);
  });

  it('nor do the comments of the service, the clients and the dashboard', () => {
    const sources = [
      ...files('src', /\.ts$/),
      ...files('dashboard', /\.(ts|tsx|html|css)$/),
      ...files('clients/python', /\.py$/),
    ];
    expect(sources.length).toBeGreaterThan(100);
    expect(citing(sources)).toEqual([]);
  });

  it('the README links the API reference, and every relative link it makes resolves', () => {
    const readme = read('README.md');
    expect(readme).toContain('](docs/api.md)');
    const links = [...readme.matchAll(/\]\(((?!https?:|#)[^)#\s]+)/g)].map((m) => m[1]!);
    expect(links.length).toBeGreaterThan(5);
    expect(links.filter((l) => !fs.existsSync(path.join(root, l)))).toEqual([]);
  });

  it("the README's walk-through shows the whole job object a submit answers", () => {
    const block = /^```json\n(\{"code":0,[^\n]*"job_type":"image-transform"[^\n]*)\n```/m.exec(read('README.md'));
    const shown = (JSON.parse(block![1]!) as { data: object }).data;
    expect(Object.keys(shown)).toEqual(Object.keys(apiJobSchema.shape));
  });

  it('the check itself sees a citation', () => {
    expect(OUTSIDE.some((re) => re.test('see ../shared/DESIGN.md §7'))).toBe(true);
  });
});
