// What every load-test scenario shares: the run's identity (stamp, results directory, smoke or
// full), its log line and its verdicts, and the report written at the end (promql.md,
// verdicts.json). loadtest/run.ts makes one per run.
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { REPO_ROOT } from '../fleet/fleet.ts';

export interface Verdict {
  name: string;
  ok: boolean;
  /** A warning only: reported, but the run still passes (smoke checks that load can upset). */
  soft?: boolean;
  detail: string;
}

export interface RunContext {
  smoke: boolean;
  stamp: string;
  resultsDir: string;
  /** The k6 binary. */
  k6: string;
  say: (line: string) => void;
  judge: (name: string, ok: boolean, detail: string, soft?: boolean) => void;
  verdicts: Verdict[];
}

export function createRunContext(options: { smoke: boolean; k6: string }): RunContext {
  const startedAt = Date.now();
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const verdicts: Verdict[] = [];
  const say = (line: string) =>
    process.stdout.write(`[loadtest ${((Date.now() - startedAt) / 1000).toFixed(1).padStart(6)}s] ${line}\n`);
  return {
    smoke: options.smoke,
    stamp,
    resultsDir: path.join(REPO_ROOT, 'loadtest/results', `${options.smoke ? 'smoke-' : ''}${stamp}`),
    k6: options.k6,
    say,
    verdicts,
    judge: (name, ok, detail, soft = false) => {
      verdicts.push({ name, ok, soft, detail });
      say(`${ok ? 'PASS' : soft ? 'WARN' : 'FAIL'} ${name}: ${detail}`);
    },
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const quantile = (xs: number[], q: number) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? NaN;
};

/** Writes promql.md and verdicts.json; 0 when every assertion held (or only warned). */
export async function finish(ctx: RunContext, profile: unknown, rows: string[][]): Promise<number> {
  const { verdicts, smoke, stamp, resultsDir } = ctx;
  const ok = verdicts.every((v) => v.ok || v.soft);
  const md = [
    `# proxyfleet load test (${smoke ? 'smoke' : 'full'}), ${stamp}`,
    '',
    '| assertion | result | detail |',
    '|---|---|---|',
    ...verdicts.map(
      (v) =>
        `| ${v.name} | ${v.ok ? 'PASS' : v.soft ? 'WARN' : 'FAIL'} | ${v.detail.replaceAll('|', '\\|')} |`,
    ),
    '',
    '| figure | value |',
    '|---|---|',
    ...rows.map(([k, v]) => `| ${k} | ${v} |`),
    '',
  ].join('\n');
  await writeFile(path.join(resultsDir, 'promql.md'), md);
  await writeFile(
    path.join(resultsDir, 'verdicts.json'),
    JSON.stringify(
      {
        ok,
        profile,
        verdicts,
        figures: Object.fromEntries(rows.map((r): [string, string] => [r[0] ?? '', r[1] ?? ''])),
      },
      null,
      2,
    ),
  );
  ctx.say(
    `${ok ? 'all assertions held' : 'SOME ASSERTIONS FAILED'}; table in ${path.relative(REPO_ROOT, path.join(resultsDir, 'promql.md'))}`,
  );
  return ok ? 0 : 1;
}
