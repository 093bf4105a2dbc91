// The README's configuration table and .env.example must name every variable some entrypoint's
// schema reads: a variable added to code without documentation fails here.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { apiSchema } from '#api/config.ts';
import { cliSchema } from '#api/cli/config.ts';
import { controllerSchema } from '../controllers/src/config.ts';
import { devSchema } from '../dev/config.ts';
import { gatewaySchema } from '../gateway/src/config.ts';
import { relaySchema } from '../relay/src/config.ts';
import { workerSchema } from '../worker/src/config.ts';
import { REPO_ROOT } from './process.ts';

const variables = [
  ...new Set(
    [apiSchema, cliSchema, controllerSchema, devSchema, gatewaySchema, relaySchema, workerSchema].flatMap(
      (s) => Object.keys(s.shape),
    ),
  ),
].sort();

describe('configuration documentation', () => {
  it.each(['README.md', '.env.example'])('%s names every configuration variable', async (file) => {
    const text = await readFile(path.join(REPO_ROOT, file), 'utf8');
    const missing = variables.filter((v) => !new RegExp(`\\b${v}\\b`).test(text));
    expect(missing).toEqual([]);
  });

  it('knows a realistic number of variables', () => {
    expect(variables.length).toBeGreaterThan(30);
  });
});
