// docs/architecture.md cannot go stale: every path it names in backquotes exists, and every
// `file#name` (or `file#Class.method`) is defined in that file. A move or rename that forgets the
// page fails here.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { REPO_ROOT } from './process.ts';

const DOC = 'docs/architecture.md';

/** A backquoted path: no spaces, a slash or a `#name` (a bare `main.ts` is a kind of file, not a path). */
const PATH =
  /^[a-z][\w.-]*(?:\/[\w.<>-]*)*(?:\.(?:ts|js|sql|md|json|yaml))?(?:#[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)?)?$/;

function references(markdown: string): Array<{ file: string; name?: string }> {
  const refs = [...markdown.matchAll(/`([^`\s]+)`/g)]
    .map((m) => m[1]!)
    .filter((s) => PATH.test(s) && (s.includes('/') || s.includes('#')))
    // A pattern, not a path (`migrations/functions/<room>/`).
    .filter((s) => !s.includes('<'));
  return refs.map((r) => {
    const [file, name] = r.split('#');
    return name === undefined ? { file: file! } : { file: file!, name };
  });
}

const escape = (s: string) => s.replace(/[$]/g, '\\$');

/** Whether `name` (or `Class.member`) is defined in this TypeScript, JavaScript or SQL source. */
function defines(source: string, file: string, name: string): boolean {
  if (file.endsWith('.sql')) return new RegExp(`FUNCTION\\s+${name}\\s*\\(`, 'i').test(source);
  const [outer, member] = name.split('.');
  const top = new RegExp(
    `^export\\s+(?:default\\s+)?(?:async\\s+)?(?:function\\*?|class|const|let|interface|type)\\s+${escape(outer!)}\\b|` +
      `^(?:async\\s+)?(?:function\\*?|class|const|let)\\s+${escape(outer!)}\\b`,
    'm',
  );
  if (!top.test(source)) return false;
  if (member === undefined) return true;
  // The member is defined inside the class body: from its declaration to the next top-level line.
  const start = source.search(new RegExp(`^(?:export\\s+)?class\\s+${escape(outer!)}\\b`, 'm'));
  if (start < 0) return false;
  const end = source.slice(start + 1).search(/^\}/m);
  const body = source.slice(start, end < 0 ? undefined : start + 1 + end);
  return new RegExp(
    `^\\s+(?:(?:private|public|protected|static|readonly|async|get|set)\\s+)*${escape(member)}\\s*[(<=:]`,
    'm',
  ).test(body);
}

describe(DOC, () => {
  const doc = readFileSync(path.join(REPO_ROOT, DOC), 'utf8');
  const refs = references(doc);

  test('names a realistic number of files and functions', () => {
    expect(refs.length).toBeGreaterThan(50);
    expect(refs.filter((r) => r.name).length).toBeGreaterThan(25);
  });

  test('every path it names exists', () => {
    expect(refs.filter((r) => !existsSync(path.join(REPO_ROOT, r.file))).map((r) => r.file)).toEqual([]);
  });

  test('every function it names is defined in the file it names', () => {
    const missing = refs
      .filter((r) => r.name !== undefined && existsSync(path.join(REPO_ROOT, r.file)))
      .filter((r) => !defines(readFileSync(path.join(REPO_ROOT, r.file), 'utf8'), r.file, r.name!))
      .map((r) => `${r.file}#${r.name}`);
    expect(missing).toEqual([]);
  });
});

describe('the checks themselves', () => {
  test('a path, a function and a method are found; prose in backquotes is not a path', () => {
    expect(
      references(
        '`a/b.ts#f`, `a/b.ts#C.m`, `dir/`, `x.js#f`, `main.ts`, `npm start`, `/api/v1`, `a/<room>/`',
      ),
    ).toEqual([
      { file: 'a/b.ts', name: 'f' },
      { file: 'a/b.ts', name: 'C.m' },
      { file: 'dir/' },
      { file: 'x.js', name: 'f' },
    ]);
  });

  test('a definition is told from a mere use', () => {
    const src =
      'export class C {\n  private x = 1;\n  async m(a: number) {}\n}\nconst k = g();\nexport function f() {}\n';
    expect(defines(src, 'a.ts', 'f')).toBe(true);
    expect(defines(src, 'a.ts', 'k')).toBe(true);
    expect(defines(src, 'a.ts', 'C.m')).toBe(true);
    expect(defines(src, 'a.ts', 'C.x')).toBe(true);
    expect(defines(src, 'a.ts', 'g')).toBe(false);
    expect(defines(src, 'a.ts', 'C.n')).toBe(false);
    expect(defines('CREATE OR REPLACE FUNCTION usage_fold(p integer)', 'a.sql', 'usage_fold')).toBe(true);
    expect(defines('SELECT usage_fold(1)', 'a.sql', 'usage_fold')).toBe(false);
  });
});
