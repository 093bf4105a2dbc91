// The chart's observability files: the Prometheus rules pass `promtool check rules` and their
// `promtool test rules` unit tests; every alert has a test case and a runbook section; every
// recording rule has a test; every dashboard query is valid PromQL; every metric they name is one
// the code exports.
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { parse } from 'yaml';
import { z } from 'zod';
import { REPO_ROOT } from './process.ts';

const run = promisify(execFile);
const FILES = path.join(REPO_ROOT, 'charts/proxyfleet/files');
const RULES = path.join(FILES, 'proxyfleet.rules.yaml');
const RULE_TESTS = path.join(FILES, 'proxyfleet.rules.test.yaml');
const DASHBOARD = path.join(FILES, 'proxyfleet-dashboard.json');
const promtool = process.env.PROMTOOL ?? 'promtool';

const rulesSchema = z.object({
  groups: z.array(
    z.object({
      name: z.string(),
      rules: z.array(
        z.object({
          record: z.string().optional(),
          alert: z.string().optional(),
          expr: z.string(),
          annotations: z.record(z.string(), z.string()).optional(),
        }),
      ),
    }),
  ),
});
const testsSchema = z.object({
  tests: z.array(
    z.object({
      promql_expr_test: z.array(z.object({ expr: z.string() })).optional(),
      alert_rule_test: z
        .array(z.object({ alertname: z.string(), exp_alerts: z.array(z.unknown()) }))
        .optional(),
    }),
  ),
});
const dashboardSchema = z.object({
  panels: z.array(z.object({ title: z.string(), targets: z.array(z.object({ expr: z.string() })) })),
});

let rules: z.infer<typeof rulesSchema>;
let tests: z.infer<typeof testsSchema>;
let dashboard: z.infer<typeof dashboardSchema>;
let tmp: string;
beforeAll(async () => {
  rules = rulesSchema.parse(parse(await readFile(RULES, 'utf8')));
  tests = testsSchema.parse(parse(await readFile(RULE_TESTS, 'utf8')));
  dashboard = dashboardSchema.parse(JSON.parse(await readFile(DASHBOARD, 'utf8')));
  tmp = await mkdtemp(path.join(os.tmpdir(), 'proxyfleet-observability-'));
});
afterAll(async () => {
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

const allRules = () => rules.groups.flatMap((g) => g.rules);
const alerts = () => allRules().flatMap((r) => (r.alert ? [r] : []));

describe('Prometheus rules (charts/proxyfleet/files/proxyfleet.rules.yaml)', () => {
  it('pass promtool check rules', async () => {
    const { stdout } = await run(promtool, ['check', 'rules', RULES]);
    expect(stdout).toMatch(/SUCCESS: \d+ rules found/);
  });

  it('pass their promtool unit tests', async () => {
    const { stdout, stderr } = await run(promtool, ['test', 'rules', RULE_TESTS]).catch(
      (err: { stdout?: string; stderr?: string }) => {
        throw new Error(`promtool test rules failed:\n${err.stdout ?? ''}${err.stderr ?? ''}`);
      },
    );
    expect(`${stdout}${stderr}`).toMatch(/SUCCESS/);
  });

  it('test every alert firing and every recording rule', () => {
    const firing = new Set(
      tests.tests.flatMap((t) =>
        (t.alert_rule_test ?? []).filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname),
      ),
    );
    expect(
      alerts()
        .map((a) => a.alert)
        .filter((a) => !firing.has(a!)),
    ).toEqual([]);
    const tested = new Set(tests.tests.flatMap((t) => (t.promql_expr_test ?? []).map((e) => e.expr.trim())));
    expect(allRules().flatMap((r) => (r.record && !tested.has(r.record) ? [r.record] : []))).toEqual([]);
  });

  it('give every alert a runbook section in docs/runbooks.md, linked by runbook_url', async () => {
    const runbooks = await readFile(path.join(REPO_ROOT, 'docs/runbooks.md'), 'utf8');
    const sections = new Set([...runbooks.matchAll(/^## (\S+)$/gm)].map((m) => m[1]));
    for (const rule of alerts()) {
      expect(sections.has(rule.alert)).toBe(true);
      expect(rule.annotations?.runbook_url).toBe(`docs/runbooks.md#${rule.alert!.toLowerCase()}`);
      expect(rule.annotations?.summary).toBeTruthy();
    }
    // No orphan sections either.
    expect([...sections].filter((s) => !alerts().some((a) => a.alert === s))).toEqual([]);
  });
});

describe('Grafana dashboard (charts/proxyfleet/files/proxyfleet-dashboard.json)', () => {
  it('has the panels the issue asks for', () => {
    const titles = dashboard.panels.map((p) => p.title.toLowerCase()).join('\n');
    for (const word of [
      'traffic by plan',
      'bytes',
      'refusals by reason',
      'latency',
      'leases',
      'flush lag',
      'api requests',
      'controller',
    ]) {
      expect(titles).toContain(word);
    }
  });

  it('queries valid PromQL only (each query checked by promtool as a recording rule)', async () => {
    const exprs = dashboard.panels.flatMap((p) =>
      p.targets.map((t) => t.expr.replaceAll('$__rate_interval', '1m')),
    );
    const file = path.join(tmp, 'dashboard-queries.rules.yaml');
    const yaml = [
      'groups:',
      '  - name: dashboard',
      '    rules:',
      ...exprs.flatMap((e, i) => [
        `      - record: dashboard:query_${i}`,
        `        expr: ${JSON.stringify(e)}`,
      ]),
    ];
    await writeFile(file, `${yaml.join('\n')}\n`);
    const { stdout } = await run(promtool, ['check', 'rules', file]);
    expect(stdout).toContain(`SUCCESS: ${exprs.length} rules found`);
  });
});

describe('metric names in rules and dashboard', () => {
  it('are all exported by some process', async () => {
    const sources: string[] = [];
    const walk = async (dir: string): Promise<void> => {
      for (const entry of await readdir(dir, { withFileTypes: true })) {
        const full = path.join(dir, entry.name);
        if (entry.isDirectory()) await walk(full);
        else if (entry.name.endsWith('.ts') && !entry.name.includes('.test.'))
          sources.push(await readFile(full, 'utf8'));
      }
    };
    for (const tree of ['api/src', 'common/src', 'controllers/src', 'gateway/src', 'relay/src', 'worker/src'])
      await walk(path.join(REPO_ROOT, tree));
    const code = sources.join('\n');
    const text = `${await readFile(RULES, 'utf8')}\n${await readFile(DASHBOARD, 'utf8')}`;
    const names = new Set(
      [...text.matchAll(/\bproxyfleet_[a-z_]+/g)].map((m) => m[0].replace(/_(bucket|count|sum)$/, '')),
    );
    const exported = (name: string) => {
      if (code.includes(`'${name}'`)) return true;
      // Per-component names built from a template: proxyfleet_${component}_cache_version.
      const m = /^proxyfleet_(api|gateway|worker|controller)_(.+)$/.exec(name);
      return m !== null && code.includes(`proxyfleet_\${component}_${m[2]}`);
    };
    expect([...names].filter((n) => !exported(n))).toEqual([]);
  });
});
