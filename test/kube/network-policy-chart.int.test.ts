// The chart's NetworkPolicies for the api, worker and relay pods (docs/adr/0120): on by default
// like the controller's, each admitting its ports to whom must reach them and letting out only DNS,
// the database (or the chart's PgBouncer), the relay for its clients and SMTP for the worker when
// configured; the egress targets as CIDRs or peers; the API server accepts what is rendered. And
// what the chart tells the operator for the gateways' policies (PROXYFLEET_GATEWAY_NETWORK_POLICY).
import { expect, test } from '@jest/globals';
import { loadControllerConfig } from '../../controllers/src/config.ts';
import { gatewayNetworkPolicySpec } from '../../controllers/src/proxygateway/network-policy.ts';
import type { ProxyGateway } from '../../controllers/src/crds/types.generated.ts';
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
const inRelease = {
  namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': RELEASE_NAMESPACE } },
};

type Env = { name: string; value?: string };
/** The controller's PROXYFLEET_GATEWAY_NETWORK_POLICY as the chart renders it, read as the controller reads it. */
async function gatewayPolicy(args: string[] = []) {
  const docs = (await helmTemplate(args)) as Array<{
    kind: string;
    metadata: { name: string };
    spec: { template: { spec: { containers: Array<{ env: Env[] }> } } };
  }>;
  const controller = docs.find(
    (d) => d.kind === 'Deployment' && d.metadata.name === 'proxyfleet-controller',
  )!;
  const env = controller.spec.template.spec.containers[0]!.env;
  const value = env.find((e) => e.name === 'PROXYFLEET_GATEWAY_NETWORK_POLICY')?.value;
  return loadControllerConfig({
    DATABASE_URL: 'postgresql://x@db/x',
    ...(value === undefined ? {} : { PROXYFLEET_GATEWAY_NETWORK_POLICY: value }),
  }).PROXYFLEET_GATEWAY_NETWORK_POLICY;
}

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

  test("the gateways' policy options: on by default, the database and the relay qualified with the release namespace", async () => {
    expect(await gatewayPolicy()).toEqual({
      egress: [{ ports: tcp(5432) }, { to: [{ ...inRelease, ...pods('relay') }], ports: tcp(8095) }],
      clusterCidrs: [],
      healthFrom: [],
    });
    expect(await gatewayPolicy(['--set', 'controller.gatewayNetworkPolicy.enabled=false'])).toBeUndefined();
    // The components' own policies are independent of it, and it of theirs.
    expect(
      Object.keys(await policies(['--set', 'controller.gatewayNetworkPolicy.enabled=false'])).sort(),
    ).toEqual(['api', 'controller', 'relay', 'worker']);
    expect(await gatewayPolicy(['--set', 'networkPolicy.enabled=false'])).toBeDefined();

    const db = { podSelector: { matchLabels: { 'cnpg.io/cluster': 'pg' } } };
    const elsewhere = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'db' } } };
    const monitoring = {
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } },
    };
    const upstream = { to: [{ ipBlock: { cidr: '10.60.0.0/16' } }], ports: tcp(3128) };
    const args = [
      ...PGBOUNCER_TEMPLATE_VALUES,
      '--set',
      'networkPolicy.databaseCidrs={10.20.0.0/16}',
      '--set-json',
      `networkPolicy.databaseSelectors=${JSON.stringify([db, elsewhere])}`,
      '--set',
      'relay.enabled=false',
      '--set',
      'controller.gatewayNetworkPolicy.clusterCidrs={10.42.0.0/16,10.43.0.0/16,fd00:42::/56}',
      '--set-json',
      `controller.gatewayNetworkPolicy.healthFrom=${JSON.stringify([monitoring])}`,
      '--set-json',
      `controller.gatewayNetworkPolicy.extraEgress=${JSON.stringify([upstream])}`,
    ];
    expect(await gatewayPolicy(args)).toEqual({
      egress: [
        // Gateways run in other namespaces: a bare podSelector would mean theirs.
        { to: [{ ...inRelease, ...pods('pgbouncer') }], ports: tcp(6432) },
        { to: [{ ipBlock: { cidr: '10.20.0.0/16' } }, { ...inRelease, ...db }, elsewhere], ports: tcp(5432) },
        upstream,
      ],
      clusterCidrs: ['10.42.0.0/16', '10.43.0.0/16', 'fd00:42::/56'],
      healthFrom: [monitoring],
    });
    // The chart's own policies keep the peer as given (their pods are in the release namespace).
    const own = await policies(args);
    expect(own.worker!.egress[2]).toEqual({
      to: [{ ipBlock: { cidr: '10.20.0.0/16' } }, db, elsewhere],
      ports: tcp(5432),
    });
    await expect(
      helmTemplateText(['--set', 'controller.gatewayNetworkPolicy.clusterCidrs={10.42.0.0}']),
    ).rejects.toThrow(/clusterCidrs/);
  });

  test("the API server accepts a gateway's policy made from the chart's options", async () => {
    const options = (await gatewayPolicy([
      ...PGBOUNCER_TEMPLATE_VALUES,
      '--set-json',
      'networkPolicy.databaseSelectors=[{"podSelector":{"matchLabels":{"app":"pg"}}}]',
      '--set',
      'controller.gatewayNetworkPolicy.clusterCidrs={10.42.0.0/16,fd00:42::/56}',
      '--set-json',
      'controller.gatewayNetworkPolicy.healthFrom=[{"namespaceSelector":{}}]',
    ]))!;
    const pgw = { metadata: { name: 'basic' }, spec: { port: 12321 } } as ProxyGateway;
    const policy = {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: { name: 'basic-gateway', namespace: RELEASE_NAMESPACE },
      spec: gatewayNetworkPolicySpec(pgw, { app: 'gw' }, options, ['10.42.7.0/24']),
    };
    const out = await fx.kube.kubectl(['apply', '--server-side', '--dry-run=server', '-f', '-'], {
      input: JSON.stringify(policy),
    });
    expect(out).toMatch(/networkpolicy.networking.k8s.io\/basic-gateway serverside-applied/);
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
