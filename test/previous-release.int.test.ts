// migrations/previous-release.json is what scripts/previous-release.ts computes from git for its
// release: the commit of its tag, its newest migration, the SQL functions its code calls. A clone
// without the commit (a shallow CI checkout) cannot tell; the test says so and checks the tag only
// where it exists.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect, it } from '@jest/globals';
import { loadPreviousRelease } from '#common/db/migration-rule.ts';
import { computePreviousRelease } from '../scripts/previous-release.ts';
import { REPO_ROOT } from './process.ts';

const run = promisify(execFile);

it('the recorded previous release is what git says of its commit, and its tag (where present) points at it', async () => {
  const recorded = await loadPreviousRelease();
  const has = await run('git', ['-C', REPO_ROOT, 'cat-file', '-e', `${recorded.commit}^{commit}`]).then(
    () => true,
    () => false,
  );
  if (!has) {
    process.stdout.write(`${recorded.commit} is not in this clone: the record is not checked\n`);
    return;
  }
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
