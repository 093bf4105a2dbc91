// The previous release (migrations/previous-release.json) seen from git where the clone has its
// commit (a shallow CI checkout may not: the tests say so and check nothing more):
// - the record is what scripts/previous-release.ts computes for it, and its tag points at it;
// - its migrations folder and this tree's, on one database, in the orders an upgrade and a
//   rollback run them: the upgrade applies only this tree's newer migrations, once; the rollback's
//   previous release applies none and starts (docs/adr/0124).
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { loadMigrations, migrateSchema } from '#common/db/migrate.ts';
import { loadPreviousRelease, type PreviousRelease } from '#common/db/migration-rule.ts';
import { createEmptyDatabase } from '#test/db.ts';
import { computePreviousRelease } from '../scripts/previous-release.ts';
import { REPO_ROOT } from './process.ts';

const run = promisify(execFile);

describe('the previous release', () => {
  let recorded: PreviousRelease;
  let has = false;
  let tree: string;
  beforeAll(async () => {
    recorded = await loadPreviousRelease();
    has = await run('git', ['-C', REPO_ROOT, 'cat-file', '-e', `${recorded.commit}^{commit}`]).then(
      () => true,
      () => false,
    );
    if (!has) process.stdout.write(`${recorded.commit} is not in this clone: nothing is checked\n`);
    tree = await mkdtemp(path.join(os.tmpdir(), 'pf-previous-'));
    if (has)
      await run('bash', [
        '-c',
        `git -C "$0" archive "$1" migrations | tar -x -C "$2"`,
        REPO_ROOT,
        recorded.commit,
        tree,
      ]);
  });
  afterAll(() => rm(tree, { recursive: true, force: true }));

  it('is recorded as git says of its commit, and its tag (where present) points at it', async () => {
    if (!has) return;
    expect(await computePreviousRelease(recorded.release, recorded.commit)).toEqual(recorded);
    const tag = await run('git', [
      '-C',
      REPO_ROOT,
      'rev-parse',
      '-q',
      '--verify',
      `refs/tags/${recorded.release}^{commit}`,
    ])
      .then(({ stdout }) => stdout.trim())
      .catch(() => undefined);
    if (tag !== undefined) expect(tag).toBe(recorded.commit);
  });

  it("upgrade then rollback on one database: this tree applies only its newer migrations; the previous release's migrate then applies none", async () => {
    if (!has) return;
    const previousDir = path.join(tree, 'migrations');
    const db = await createEmptyDatabase();
    try {
      const installed = await migrateSchema(db.url, previousDir);
      expect(Math.max(...installed.migrations)).toBe(recorded.lastMigration);
      const upgraded = await migrateSchema(db.url);
      const mine = (await loadMigrations()).map((m) => m.version);
      expect(upgraded.migrations).toEqual(mine.filter((v) => !installed.migrations.includes(v)));
      const rolledBack = await migrateSchema(db.url, previousDir);
      expect(rolledBack.migrations).toEqual([]);
      // What the rollback's first old pod puts back: the function files this tree changed.
      expect(rolledBack.functions).toEqual(upgraded.functions.filter((f) => installed.functions.includes(f)));
      expect((await migrateSchema(db.url)).migrations).toEqual([]);
    } finally {
      await db.drop();
    }
  });
});
