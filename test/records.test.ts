// The repository's records stand alone: every ADR says whether it still holds, and no comment or
// document points at an issue number of a tracker the repository does not contain.
import { execFileSync } from 'node:child_process';
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { REPO_ROOT } from './process.ts';

const ISSUE_REFERENCE = /\bissues? #?\d+/i;
const STATUS = /^Status: (accepted|superseded by \d{4}|proposed)\b/m;

describe('records', () => {
  it('every ADR has a Status line', async () => {
    const dir = path.join(REPO_ROOT, 'docs/adr');
    const adrs = (await readdir(dir)).filter((f) => /^\d{4}-.*\.md$/.test(f));
    expect(adrs.length).toBeGreaterThan(40);
    const without: string[] = [];
    for (const adr of adrs) if (!STATUS.test(await readFile(path.join(dir, adr), 'utf8'))) without.push(adr);
    expect(without).toEqual([]);
  });

  it('no tracked file cites an issue number', async () => {
    const files = execFileSync('git', ['ls-files'], { cwd: REPO_ROOT, encoding: 'utf8' })
      .split('\n')
      .filter((f) => /\.(ts|js|sql|md|sh|ya?ml|tpl|json)$/.test(f));
    expect(files.length).toBeGreaterThan(100);
    const citing: string[] = [];
    for (const file of files) {
      const text = await readFile(path.join(REPO_ROOT, file), 'utf8').catch(() => '');
      text.split('\n').forEach((line, i) => {
        if (ISSUE_REFERENCE.test(line) && !line.includes('ISSUE_REFERENCE')) citing.push(`${file}:${i + 1}`);
      });
    }
    expect(citing).toEqual([]);
  });
});
