// k6 runs of a scenario: one script of loadtest/k6 with its environment; its summary (JSON) and
// log go to the run's results directory.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { REPO_ROOT } from '../fleet/fleet.ts';

const summarySchema = z.object({
  metrics: z.record(
    z.string(),
    z.object({
      values: z.record(z.string(), z.number()),
      thresholds: z.record(z.string(), z.object({ ok: z.boolean() })).optional(),
    }),
  ),
});
export type Summary = z.infer<typeof summarySchema>;
/** One value of a k6 metric in a summary (0 when absent, or when k6 wrote no summary). */
export const metric = (s: Summary | undefined, name: string, value = 'count') =>
  s?.metrics[name]?.values[value] ?? 0;

/** Runs one k6 script (loadtest/k6/<script>); its summary and log go to `run.resultsDir` as k6-<name>.*. */
export function runK6(
  run: { k6: string; resultsDir: string },
  script: string,
  env: Record<string, string>,
  name: string,
): Promise<{ code: number; summary: Summary | undefined }> {
  const summaryPath = path.join(run.resultsDir, `k6-${name}.json`);
  return new Promise((resolve, reject) => {
    const child = spawn(
      run.k6,
      ['run', '--quiet', '--no-color', path.join(REPO_ROOT, 'loadtest/k6', script)],
      {
        cwd: REPO_ROOT,
        env: {
          PATH: process.env.PATH,
          HOME: process.env.HOME,
          K6_NO_USAGE_REPORT: 'true',
          SUMMARY: summaryPath,
          ...env,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const out: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => out.push(c));
    child.on('error', reject);
    child.on('exit', (code) => {
      void (async () => {
        await writeFile(path.join(run.resultsDir, `k6-${name}.log`), Buffer.concat(out));
        const summary = existsSync(summaryPath)
          ? summarySchema.parse(JSON.parse(await readFile(summaryPath, 'utf8')))
          : undefined;
        resolve({ code: code ?? -1, summary });
      })().catch(reject);
    });
  });
}
