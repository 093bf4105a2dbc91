// The size rule (eslint.config.js: max-lines): source files stop at SOURCE_MAX_LINES, tests and
// harnesses at TEST_MAX_LINES, generated files are not capped, and every exception is named with
// its reason and removed once its file is cut. None is named today: every source file is within
// SOURCE_MAX_LINES.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import type { Linter } from 'eslint';
import { REPO_ROOT } from '../process.ts';
import { eslintWithRules } from './eslint.ts';

const CONFIG = new URL('../../eslint.config.js', import.meta.url).href;

interface SizeConfig {
  lintConfig: (root: string) => Linter.Config[];
  SOURCE_MAX_LINES: number;
  TEST_MAX_LINES: number;
  SIZE_EXCEPTIONS: Record<string, string>;
}
const config = async () => (await import(CONFIG)) as SizeConfig;

/**
 * The max-lines findings for a file of `lines` lines at `file` (a path in this repository), with the
 * configuration's exceptions or `exceptions`.
 */
async function sizeFindings(
  file: string,
  lines: number,
  exceptions?: Record<string, string>,
): Promise<string[]> {
  const eslint = await eslintWithRules(REPO_ROOT, ['max-lines'], exceptions);
  const text = Array.from({ length: lines }, (_, i) => `export const v${i} = ${i};`).join('\n') + '\n';
  const [result] = await eslint.lintText(text, { filePath: path.join(REPO_ROOT, file) });
  return result!.messages.map((m) => `${m.ruleId}: ${m.message}`);
}

describe('the size rule', () => {
  it('refuses a source file past the source cap and a test past the test cap; generated files are free', async () => {
    const { SOURCE_MAX_LINES: source, TEST_MAX_LINES: tests } = await config();
    expect(await sizeFindings('api/src/modules/usage/big.ts', source)).toEqual([]);
    expect(await sizeFindings('api/src/modules/usage/big.ts', source + 1)).toEqual([
      expect.stringMatching(
        new RegExp(`^max-lines: File has too many lines \\(${source + 1}\\)\\. Maximum allowed is ${source}`),
      ),
    ]);
    expect(await sizeFindings('api/src/modules/usage/big.int.test.ts', tests)).toEqual([]);
    expect(await sizeFindings('test/big-support.ts', tests + 1)).toEqual([
      expect.stringMatching(/^max-lines: /),
    ]);
    expect(await sizeFindings('loadtest/big.ts', tests)).toEqual([]);
    expect(await sizeFindings('controllers/src/crds/big.generated.ts', 3 * tests)).toEqual([]);
  });

  it('lets a named exception run to the test cap, no further', async () => {
    const { TEST_MAX_LINES: tests } = await config();
    const file = 'api/src/modules/usage/big.ts';
    const exceptions = { [file]: 'a made-up file, to be cut at its seam' };
    expect(await sizeFindings(file, tests, exceptions)).toEqual([]);
    expect(await sizeFindings(file, tests + 1, exceptions)).toEqual([expect.stringMatching(/^max-lines: /)]);
  });

  it('names no exception today: a new one is added here too, where a reviewer sees it', async () => {
    const { SIZE_EXCEPTIONS } = await config();
    expect(Object.keys(SIZE_EXCEPTIONS)).toEqual([]);
  });

  it('names each exception with its reason, and only while its file is still past the source cap', async () => {
    const { SIZE_EXCEPTIONS, SOURCE_MAX_LINES: source } = await config();
    const stale = Object.entries(SIZE_EXCEPTIONS).flatMap(([file, reason]) => {
      const lines = readFileSync(path.join(REPO_ROOT, file), 'utf8').split('\n').length - 1;
      if (reason.length < 20) return [`${file}: no reason given`];
      return lines > source ? [] : [`${file}: ${lines} lines, the exception can go`];
    });
    expect(stale).toEqual([]);
  });
});
