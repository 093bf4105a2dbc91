// Golden files are rewritten only on a developer's machine (UPDATE_GOLDEN=1), and the diff is
// reviewed. Under CI=true an update request is an error: CI would otherwise "pass" by rewriting
// the expectations it is meant to check.
export function mayUpdateGolden(env: Readonly<Record<string, string | undefined>> = process.env): boolean {
  if (!env.UPDATE_GOLDEN) return false;
  if (env.CI && env.CI !== 'false' && env.CI !== '0') {
    throw new Error('UPDATE_GOLDEN is refused under CI: update golden files locally and review the diff');
  }
  return true;
}
