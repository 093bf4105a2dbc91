// A clone has this repository and nothing else: the README and docs/ link only to files in it, and
// neither they nor code comments cite documents that live outside it (a sibling directory of
// design documents, research notes, absolute paths of a development machine).
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { REPO_ROOT } from './process.ts';

const SKIP = new Set(['node_modules', '.git', '.proxyfleet', 'coverage']);

function walk(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name)) continue;
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) walk(full, out);
    else out.push(full);
  }
  return out;
}

const files = walk(REPO_ROOT).filter((f) => /\.(ts|js|md|ya?ml|json|sh)$|Dockerfile$|\/\.ci\/run$/.test(f));
const docs = files.filter((f) => f.endsWith('.md'));
const rel = (f: string) => path.relative(REPO_ROOT, f);
// Written in pieces so that this file does not match itself.
const OUTSIDE = [
  new RegExp(['\\.\\.', 'shared'].join('/')),
  new RegExp(`(^|[^\\w/.-])${'notes'}/\\w+\\.md`),
  new RegExp(`/${'work'}/(main|shared|wt-)`),
];

describe('the repository stands alone', () => {
  test.each(files.map(rel))('%s cites nothing outside the repository', (file) => {
    const text = readFileSync(path.join(REPO_ROOT, file), 'utf8');
    for (const pattern of OUTSIDE) expect(text).not.toMatch(pattern);
  });

  test.each(docs.map(rel))('every relative link in %s resolves to a file of the repository', (file) => {
    const text = readFileSync(path.join(REPO_ROOT, file), 'utf8');
    const missing: string[] = [];
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (!target || /^(https?:|mailto:|#)/.test(target)) continue;
      const resolved = path.resolve(path.dirname(path.join(REPO_ROOT, file)), target.split('#')[0]!);
      if (!resolved.startsWith(REPO_ROOT) || !existsSync(resolved)) missing.push(target);
    }
    expect(missing).toEqual([]);
  });

  test('code comments cite the design and style documents where a clone has them', () => {
    for (const file of files.filter((f) => /\.(ts|js)$/.test(f))) {
      const text = readFileSync(file, 'utf8');
      expect({ file: rel(file), bare: /(?<![/\w])(DESIGN|STYLE)\.md/.test(text) }).toEqual({
        file: rel(file),
        bare: false,
      });
    }
  });

  test('.env is read by npm start and the start scripts, git-ignored, and the example changes nothing as is', () => {
    const pkg = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    for (const name of ['start', 'start:api', 'start:gateway', 'start:worker', 'start:controller']) {
      expect(pkg.scripts[name]).toContain('--env-file-if-exists=.env');
    }
    expect(readFileSync(path.join(REPO_ROOT, '.gitignore'), 'utf8').split('\n')).toContain('.env');
    const assigned = readFileSync(path.join(REPO_ROOT, '.env.example'), 'utf8')
      .split('\n')
      .filter((l) => /^\s*[A-Z]/.test(l));
    expect(assigned).toEqual([]);
  });
});
