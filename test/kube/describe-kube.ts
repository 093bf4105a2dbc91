// describe() for suites that need the control-plane binaries (test/kube/env.ts).
import { describe, test } from '@jest/globals';
import { missingKubeTools, toolsBinDir } from './env.ts';

/**
 * describe() when the control-plane binaries are installed. Without them: outside CI the suite
 * is skipped with a loud warning saying why; with CI set, a failing test instead, so a CI run
 * can never pass without having run the kube tests.
 */
export function describeKube(name: string, fn: () => void): void {
  const missing = missingKubeTools();
  if (missing.length === 0) {
    describe(name, fn);
    return;
  }
  const why =
    `kube integration tests "${name}" need ${missing.join(', ')} in ${toolsBinDir()}; ` +
    'build them with `bash scripts/install-tools.sh` (needs Go >= 1.26)';
  if (process.env.CI) {
    describe(name, () => {
      test('control-plane binaries are installed (CI must run the kube tests)', () => {
        throw new Error(why);
      });
    });
    return;
  }
  console.warn(`SKIPPED: ${why}`);
  describe.skip(name, fn);
}
