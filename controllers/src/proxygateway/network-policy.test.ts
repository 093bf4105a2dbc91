// The gateways' NetworkPolicy (network-policy.ts): what it admits, when desired.ts keeps one, and
// how PROXYFLEET_GATEWAY_NETWORK_POLICY is read. The whole objects are in the golden files.
import { describe, expect, test } from '@jest/globals';
import type { ProxyGateway } from '../crds/types.generated.ts';
import { loadControllerConfig } from '../config.ts';
import { desiredObjects } from './desired.ts';
import { gatewayNetworkPolicySpec, type GatewayNetworkPolicyOptions } from './network-policy.ts';
import type { GatewayOptions } from './pod.ts';

const gateway = (spec: Partial<ProxyGateway['spec']> = {}): ProxyGateway => ({
  apiVersion: 'proxyfleet.io/v1alpha1',
  kind: 'ProxyGateway',
  metadata: { name: 'basic', namespace: 'proxy', uid: 'u-1' },
  spec: {
    plan: 'basic',
    port: 12321,
    advertisedHost: 'basic.proxy.example.com',
    exits: [{ name: 'direct', country: '*' }],
    session: { defaultMinutes: 10, maxMinutes: 1440 },
    timeouts: { headersSeconds: 10, connectSeconds: 10, idleSeconds: 300, maxLifetimeSeconds: 86400 },
    limits: { maxConnectionsPerAccount: 1000 },
    replicas: { min: 2, max: 2 },
    autoscaling: { targetCPUUtilizationPercent: 70 },
    service: { type: 'ClusterIP' },
    ...spec,
  },
});
const POLICY: GatewayNetworkPolicyOptions = { egress: [], clusterCidrs: [], healthFrom: [] };
const OPTIONS: GatewayOptions = {
  image: 'proxyfleet:test',
  imagePullPolicy: 'IfNotPresent',
  databaseSecret: { name: 'proxyfleet-database', key: 'url' },
  logLevel: 'info',
  networkPolicy: POLICY,
};
const SELECTOR = { 'app.kubernetes.io/name': 'proxyfleet-gateway', 'proxyfleet.io/proxygateway': 'basic' };
const tcp = (port: number) => ({ protocol: 'TCP' as const, port });
const kinds = (o: GatewayOptions, pgw = gateway()) => {
  const d = desiredObjects(pgw, o, 3);
  return {
    objects: d.objects.map((x) => x.object.kind),
    absent: d.absent.map((a) => `${a.resource.kind}/${a.name}`),
  };
};

describe('the gateway NetworkPolicy', () => {
  test('in: the public port and the health port from anywhere; out: DNS, then the internet', () => {
    const spec = gatewayNetworkPolicySpec(gateway({ healthPort: 9190 }), SELECTOR, POLICY);
    expect(spec).toEqual({
      podSelector: { matchLabels: SELECTOR },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [{ ports: [tcp(12321)] }, { ports: [tcp(9190)] }],
      egress: [
        { ports: [{ protocol: 'UDP', port: 53 }, tcp(53)] },
        // No cluster ranges given: no except.
        { to: [{ ipBlock: { cidr: '0.0.0.0/0' } }, { ipBlock: { cidr: '::/0' } }] },
      ],
    });
  });

  test('TLS is served on the public port: no second port', () => {
    const tls = gateway({ tls: { secretName: 'gw-tls', refuseCredentialsInClear: true } });
    expect(gatewayNetworkPolicySpec(tls, SELECTOR, POLICY).ingress[0]).toEqual({ ports: [tcp(12321)] });
  });

  test("the cluster's ranges are cut from the internet by family; the guard's exemptions and the chart's rules are let out", () => {
    const database = { to: [{ ipBlock: { cidr: '10.20.0.0/16' } }], ports: [tcp(5432)] };
    const prometheus = {
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } },
    };
    const spec = gatewayNetworkPolicySpec(
      gateway(),
      SELECTOR,
      {
        egress: [database],
        clusterCidrs: ['10.42.0.0/16', 'fd00:42::/56', '10.43.0.0/16'],
        healthFrom: [prometheus],
      },
      ['10.42.7.0/24'],
    );
    expect(spec.ingress[1]).toEqual({ from: [prometheus], ports: [tcp(9090)] });
    expect(spec.egress.slice(1)).toEqual([
      database,
      {
        to: [
          { ipBlock: { cidr: '0.0.0.0/0', except: ['10.42.0.0/16', '10.43.0.0/16'] } },
          { ipBlock: { cidr: '::/0', except: ['fd00:42::/56'] } },
        ],
      },
      // Inside an excepted range, so it needs its own rule.
      { to: [{ ipBlock: { cidr: '10.42.7.0/24' } }] },
    ]);
  });

  test('kept before the Deployment; absent when off or with hostNetwork', () => {
    expect(kinds(OPTIONS).objects.indexOf('NetworkPolicy')).toBe(
      kinds(OPTIONS).objects.indexOf('Deployment') - 1,
    );
    expect(kinds(OPTIONS).absent).not.toContain('NetworkPolicy/basic-gateway');
    const off = kinds({ ...OPTIONS, networkPolicy: undefined });
    expect(off.objects).not.toContain('NetworkPolicy');
    expect(off.absent).toContain('NetworkPolicy/basic-gateway');
    const host = kinds(OPTIONS, gateway({ hostNetwork: true }));
    expect(host.objects).not.toContain('NetworkPolicy');
    expect(host.absent).toContain('NetworkPolicy/basic-gateway');
  });
});

describe('PROXYFLEET_GATEWAY_NETWORK_POLICY', () => {
  const load = (value?: string) =>
    loadControllerConfig({
      DATABASE_URL: 'postgresql://localhost/proxyfleet',
      ...(value === undefined ? {} : { PROXYFLEET_GATEWAY_NETWORK_POLICY: value }),
    }).PROXYFLEET_GATEWAY_NETWORK_POLICY;

  test('unset or empty: off', () => {
    expect(load()).toBeUndefined();
    expect(load('')).toBeUndefined();
  });

  test('JSON with defaults for what it leaves out', () => {
    expect(load('{}')).toEqual(POLICY);
    const rule = { to: [{ podSelector: {} }], ports: [{ protocol: 'TCP', port: 6432 }] };
    expect(load(JSON.stringify({ egress: [rule], clusterCidrs: ['10.42.0.0/16', 'fd00::/8'] }))).toEqual({
      ...POLICY,
      egress: [rule],
      clusterCidrs: ['10.42.0.0/16', 'fd00::/8'],
    });
  });

  test('refused: not JSON, a range that is not one, an unknown key', () => {
    expect(() => load('{egress:')).toThrow(/PROXYFLEET_GATEWAY_NETWORK_POLICY/);
    for (const bad of ['10.42.0.0', '10.42.0.0/33', 'fd00::/129', 'cluster/16'])
      expect(() => load(JSON.stringify({ clusterCidrs: [bad] }))).toThrow(/CIDR/);
    expect(() => load(JSON.stringify({ enabled: true }))).toThrow(/enabled/);
  });
});
