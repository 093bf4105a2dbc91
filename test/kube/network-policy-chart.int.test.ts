// The chart's NetworkPolicies for the api, worker and relay pods (docs/adr/0120): on by default
// like the controller's, each admitting its ports to whom must reach them and letting out only DNS,
// the database (or the chart's PgBouncer), the relay for its clients and SMTP for the worker when
// configured; the egress targets as CIDRs or peers; the API server accepts what is rendered.
import { expect, test } from '@jest/globals';
import { describeKube } from './describe-kube.ts';
import {
  helmTemplate,
  helmTemplateText,
  PGBOUNCER_TEMPLATE_VALUES,
  RELEASE_NAMESPACE,
  useKube,
} from './env.ts';

type Port = { protocol: string; port: number };
type Rule = { ports?: Port[]; from?: unknown[]; to?: unknown[] };
type Policy = {
  kind: string;
  metadata: { name: string };
  spec: {
    podSelector: { matchLabels: Record<string, string> };
    policyTypes: string[];
    ingress: Rule[];
    egress: Rule[];
  };
};

const policies = async (args: string[] = []) =>
  Object.fromEntries(
    ((await helmTemplate(args)) as Policy[])
      .filter((d) => d.kind === 'NetworkPolicy')
      .map((d) => [d.metadata.name.replace(/^proxyfleet-/, ''), d.spec]),
  );
const tcp = (...ports: number[]) => ports.map((port) => ({ protocol: 'TCP', port }));
const pods = (name: string) => ({
  podSelector: {
    matchLabels: {
      'app.kubernetes.io/name': `proxyfleet-${name}`,
      'app.kubernetes.io/instance': 'proxyfleet',
    },
  },
});
const DNS = { ports: [{ protocol: 'UDP', port: 53 }, ...tcp(53)] };

describeKube('Helm chart: NetworkPolicies of the api, worker and relay', () => {
  const fx = useKube();

  test('defaults: each component its ports in, DNS and the database port out; the relay from its clients only', async () => {
    const p = await policies();
    expect(Object.keys(p).sort()).toEqual(['api', 'controller', 'relay', 'worker']);
    expect(p.api).toEqual({
      podSelector: pods('api').podSelector,
      policyTypes: ['Ingress', 'Egress'],
      ingress: [{ ports: tcp(8080) }, { ports: tcp(9094) }],
      egress: [DNS, { ports: tcp(5432) }, { to: [pods('relay')], ports: tcp(8095) }],
    });
    expect(p.worker).toEqual({
      podSelector: pods('worker').podSelector,
      policyTypes: ['Ingress', 'Egress'],
      ingress: [{ ports: tcp(9091) }],
      egress: [DNS, { ports: tcp(5432) }],
    });
    expect(p.relay).toEqual({
      podSelector: pods('relay').podSelector,
      policyTypes: ['Ingress', 'Egress'],
      ingress: [
        {
          from: [
            pods('api'),
            pods('worker'),
            // Gateway pods live in any namespace, labelled by the operator (controllers/src/proxygateway/desired.ts).
            {
              namespaceSelector: {},
              podSelector: { matchLabels: { 'app.kubernetes.io/name': 'proxyfleet-gateway' } },
            },
          ],
          ports: tcp(8095),
        },
        { ports: tcp(9093) },
      ],
      egress: [DNS, { ports: tcp(5432) }],
    });
  });

  test('off with networkPolicy.enabled=false (the controller keeps its own switch); no relay, no relay policy or egress', async () => {
    expect(Object.keys(await policies(['--set', 'networkPolicy.enabled=false']))).toEqual(['controller']);
    const noRelay = await policies(['--set', 'relay.enabled=false']);
    expect(Object.keys(noRelay).sort()).toEqual(['api', 'controller', 'worker']);
    expect(noRelay.api!.egress).toEqual([DNS, { ports: tcp(5432) }]);
  });

  test('the database by CIDR and peer, SMTP for the worker only when configured, extra egress per component', async () => {
    const inCluster = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'db' } } };
    const stripe = { to: [{ ipBlock: { cidr: '0.0.0.0/0' } }], ports: tcp(443) };
    const p = await policies([
      '--set',
      'networkPolicy.databaseCidrs={10.20.0.0/16,fd00:db::/64}',
      '--set-json',
      `networkPolicy.databaseSelectors=${JSON.stringify([inCluster])}`,
      '--set',
      'networkPolicy.databasePort=6543',
      '--set',
      'networkPolicy.smtpCidrs={192.0.2.25/32}',
      '--set-json',
      `networkPolicy.extraEgress.api=${JSON.stringify([stripe])}`,
    ]);
    const database = {
      to: [{ ipBlock: { cidr: '10.20.0.0/16' } }, { ipBlock: { cidr: 'fd00:db::/64' } }, inCluster],
      ports: tcp(6543),
    };
    expect(p.api!.egress).toEqual([DNS, database, { to: [pods('relay')], ports: tcp(8095) }, stripe]);
    expect(p.worker!.egress).toEqual([
      DNS,
      database,
      { to: [{ ipBlock: { cidr: '192.0.2.25/32' } }], ports: tcp(587) },
    ]);
    expect(p.relay!.egress).toEqual([DNS, database]);
    // No SMTP rule anywhere without a target.
    const plain = await policies();
    expect(JSON.stringify(plain)).not.toMatch(/"port":587/);
  });

  test('with the chart PgBouncer the components reach it, not the database, unless the database is named', async () => {
    const viaPgbouncer = { to: [pods('pgbouncer')], ports: tcp(6432) };
    const p = await policies(PGBOUNCER_TEMPLATE_VALUES);
    expect(p.worker!.egress).toEqual([DNS, viaPgbouncer]);
    expect(p.relay!.egress).toEqual([DNS, viaPgbouncer]);
    const direct = await policies([
      ...PGBOUNCER_TEMPLATE_VALUES,
      '--set',
      'networkPolicy.databaseCidrs={10.20.0.0/16}',
    ]);
    expect(direct.worker!.egress).toEqual([
      DNS,
      viaPgbouncer,
      { to: [{ ipBlock: { cidr: '10.20.0.0/16' } }], ports: tcp(5432) },
    ]);
  });

  test('apiFrom narrows the API port (the helm test pod still admitted), metricsFrom the health ports and /metrics', async () => {
    const ingress = {
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } },
    };
    const prometheus = {
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } },
    };
    const p = await policies([
      '--set-json',
      `networkPolicy.apiFrom=${JSON.stringify([ingress])}`,
      '--set-json',
      `networkPolicy.metricsFrom=${JSON.stringify([prometheus])}`,
    ]);
    expect(p.api!.ingress).toEqual([
      { from: [ingress, pods('test')], ports: tcp(8080) },
      // The API serves /metrics on its own port.
      { from: [prometheus], ports: tcp(9094, 8080) },
    ]);
    expect(p.worker!.ingress).toEqual([{ from: [prometheus], ports: tcp(9091) }]);
    expect(p.relay!.ingress[1]).toEqual({ from: [prometheus], ports: tcp(9093) });
  });

  test('bad targets are refused by the schema', async () => {
    await expect(helmTemplateText(['--set', 'networkPolicy.databaseCidrs={db.example.com}'])).rejects.toThrow(
      /databaseCidrs/,
    );
    await expect(helmTemplateText(['--set', 'networkPolicy.smtpPort=0'])).rejects.toThrow(/smtpPort/);
    await expect(helmTemplateText(['--set', 'networkPolicy.extraEgress.gateway[0].ports=x'])).rejects.toThrow(
      /additional properties 'gateway' not allowed/,
    );
  });

  test('the API server accepts every rendered policy', async () => {
    const text = await helmTemplateText([
      ...PGBOUNCER_TEMPLATE_VALUES,
      '--set',
      'networkPolicy.databaseCidrs={10.20.0.0/16}',
      '--set',
      'networkPolicy.smtpCidrs={192.0.2.25/32}',
      '--set-json',
      'networkPolicy.metricsFrom=[{"namespaceSelector":{}}]',
      '--set-json',
      'networkPolicy.apiFrom=[{"ipBlock":{"cidr":"203.0.113.0/24"}}]',
      '--show-only',
      'templates/networkpolicies.yaml',
    ]);
    const out = await fx.kube.kubectl(
      ['apply', '--server-side', '--dry-run=server', '-n', RELEASE_NAMESPACE, '-f', '-'],
      { input: text },
    );
    for (const name of ['api', 'worker', 'relay'])
      expect(out).toMatch(
        new RegExp(`networkpolicy.networking.k8s.io/proxyfleet-${name} serverside-applied`),
      );
  });
});
