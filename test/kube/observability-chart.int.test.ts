// The chart's observability bundle: with serviceMonitor, prometheusRule and grafanaDashboard on,
// `helm lint` passes and `helm template` renders a ServiceMonitor for the API, worker and
// controller Services, a PodMonitor for the operator's gateway pods, the PrometheusRule holding
// exactly the rule file's groups (runbook links under runbookBaseUrl), and the dashboard ConfigMap
// with Grafana's sidecar label; with the toggles off, none of them.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect, test } from '@jest/globals';
import { parse } from 'yaml';
import { describeKube } from './describe-kube.ts';
import { CHART_DIR, CHART_TEST_VALUES, helmTemplate, REPO_ROOT, tool } from './env.ts';

const run = promisify(execFile);
const ON = [
  '--set',
  'serviceMonitor.enabled=true',
  '--set',
  'prometheusRule.enabled=true',
  '--set',
  'grafanaDashboard.enabled=true',
  '--set',
  'prometheusRule.runbookBaseUrl=https://runbooks.example/proxyfleet.md',
];
type Doc = {
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  spec?: unknown;
  data?: Record<string, string>;
};

describeKube('Helm chart observability (ServiceMonitor, PodMonitor, PrometheusRule, dashboard)', () => {
  test('helm lint passes with every toggle on', async () => {
    const { stdout } = await run(tool('helm'), ['lint', CHART_DIR, ...CHART_TEST_VALUES, ...ON]);
    expect(stdout).toContain('0 chart(s) failed');
  });

  test('renders the bundle with the toggles on', async () => {
    const docs = (await helmTemplate(ON)) as unknown as Doc[];
    const kinds = (k: string) => docs.filter((d) => d.kind === k);

    const monitors = kinds('ServiceMonitor');
    expect(monitors).toHaveLength(1);
    const endpoints = (monitors[0]!.spec as { endpoints: { port: string; path: string }[] }).endpoints;
    // The API Service's port is `http`; the worker's and controller's are `metrics`.
    expect(endpoints.map((e) => e.port).sort()).toEqual(['http', 'metrics']);
    const services = kinds('Service');
    const ports = services.flatMap((s) =>
      (s.spec as { ports: { name: string }[] }).ports.map((p) => `${s.metadata.name}:${p.name}`),
    );
    for (const component of ['api', 'worker', 'controller']) {
      expect(ports.some((p) => p.includes(component) && /:(http|metrics)$/.test(p))).toBe(true);
    }
    const podMonitors = kinds('PodMonitor');
    expect(podMonitors).toHaveLength(1);
    expect(JSON.stringify(podMonitors[0]!.spec)).toContain('proxyfleet-gateway');

    const rules = kinds('PrometheusRule');
    expect(rules).toHaveLength(1);
    const file = parse(await readFile(path.join(CHART_DIR, 'files/proxyfleet.rules.yaml'), 'utf8')) as {
      groups: unknown[];
    };
    const expected = JSON.parse(
      JSON.stringify(file.groups).replaceAll('docs/runbooks.md', 'https://runbooks.example/proxyfleet.md'),
    ) as unknown;
    expect((rules[0]!.spec as { groups: unknown }).groups).toEqual(expected);

    const dashboards = kinds('ConfigMap').filter((c) => c.metadata.name.endsWith('-dashboard'));
    expect(dashboards).toHaveLength(1);
    expect(dashboards[0]!.metadata.labels?.grafana_dashboard).toBe('1');
    const json = await readFile(
      path.join(REPO_ROOT, 'charts/proxyfleet/files/proxyfleet-dashboard.json'),
      'utf8',
    );
    expect(JSON.parse(dashboards[0]!.data!['proxyfleet.json']!)).toEqual(JSON.parse(json));
  });

  test('renders none of it with the toggles off (the default)', async () => {
    const docs = (await helmTemplate()) as unknown as Doc[];
    expect(docs.filter((d) => ['ServiceMonitor', 'PodMonitor', 'PrometheusRule'].includes(d.kind))).toEqual(
      [],
    );
    expect(docs.filter((d) => d.kind === 'ConfigMap' && d.metadata.name.endsWith('-dashboard'))).toEqual([]);
  });
});
