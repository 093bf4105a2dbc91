// migrations/previous-release.json, computed from git: the release an upgrade starts from and a
// rollback returns to (docs/operator.md "Upgrades and rollback", docs/adr/0124). Cutting a release
// (an annotated tag on main), record it as the previous one of the next:
//   git tag -a v0.2.0 -m '...' <commit> && npm run -s release:record -- v0.2.0
// - commit: the commit the tag points at (scripts/previous-release.sh finds it by hash where a
//   clone has no tags);
// - lastMigration: its newest numbered migration (the rule holds the later ones to expand only);
// - functions: the SQL functions its code calls by name (a function file's name in a TypeScript
//   source that is not a test, loadtest or dev file): the ones a migration must not drop or
//   rename while that release can run. A name in a comment counts too; more is only safer.
// test/previous-release.int.test.ts checks the recorded file against this.
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { PreviousRelease } from '#common/db/migration-rule.ts';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const RECORD = path.join(ROOT, 'migrations/previous-release.json');

const git = async (args: string[]) =>
  (await run('git', ['-C', ROOT, ...args], { maxBuffer: 64 << 20 })).stdout.trim();

/** The record of `release` (a tag) or of `release` at `commit` (a clone without the tag). */
export async function computePreviousRelease(release: string, commit?: string): Promise<PreviousRelease> {
  const sha = await git(['rev-parse', '--verify', `${commit ?? `refs/tags/${release}`}^{commit}`]);
  const files = (await git(['ls-tree', '-r', '--name-only', sha, 'migrations/'])).split('\n');
  const versions = files.flatMap((f) => /^migrations\/(\d{4})_[a-z0-9_]+\.sql$/.exec(f)?.[1] ?? []);
  const names = [
    ...new Set(
      files.flatMap(
        (f) => /^migrations\/functions\/(?:[a-z0-9-]+\/)?([a-z][a-z0-9_]*)\.sql$/.exec(f)?.[1] ?? [],
      ),
    ),
  ];
  // git grep exits 1 when nothing matches.
  const called = await git([
    'grep',
    '-h',
    '-o',
    '-w',
    '-E',
    `(${names.join('|')})`,
    sha,
    '--',
    '*.ts',
    ':!*.test.ts',
    ':!test/**',
    ':!loadtest/**',
    ':!dev/**',
  ]).catch((err: { code?: number }) => (err.code === 1 ? '' : Promise.reject(err as Error)));
  const functions = [...new Set(called.split('\n').flatMap((l) => l.split(':').pop() || []))].sort();
  return { release, commit: sha, lastMigration: Math.max(...versions.map(Number)), functions };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const release = process.argv[2];
  if (!release || !/^v\d+\.\d+\.\d+$/.test(release)) {
    process.stderr.write(
      'usage: npm run -s release:record -- vX.Y.Z (an annotated tag of this repository)\n',
    );
    process.exit(2);
  }
  await writeFile(RECORD, `${JSON.stringify(await computePreviousRelease(release), null, 2)}\n`);
  process.stdout.write(`${RECORD}\n`);
}
