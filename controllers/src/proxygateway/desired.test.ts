// Golden files: the exact objects each example ProxyGateway produces. After an intended change,
// regenerate with UPDATE_GOLDEN=1 npm run jest -- controllers/src/proxygateway/desired and review
// the diff of testdata/*.golden.yaml.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { stringify } from 'yaml';
import { loadGatewayConfig } from '../../../gateway/src/config.ts';
import { readProxyGateways } from '../../../gateway/src/spec.ts';
import type { ProxyGateway } from '../crds/types.generated.ts';
import { desiredObjects, gatewayConfigYaml } from './desired.ts';
import { UPSTREAMS_DIR, type GatewayOptions } from './pod.ts';
import { mayUpdateGolden } from '#test/golden.ts';

const OPTIONS: GatewayOptions = {
  image: 'ghcr.io/proxyfleet/proxyfleet:0.1.0',
  imagePullPolicy: 'IfNotPresent',
  databaseSecret: { name: 'proxyfleet-database', key: 'url' },
  logLevel: 'info',
  // The chart's default (its NetworkPolicy on), a database outside the cluster and the relay.
  networkPolicy: {
    egress: [
      { to: [{ ipBlock: { cidr: '10.20.0.0/16' } }], ports: [{ protocol: 'TCP', port: 5432 }] },
      {
        to: [
          {
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'proxyfleet' } },
            podSelector: {
              matchLabels: {
                'app.kubernetes.io/name': 'proxyfleet-relay',
                'app.kubernetes.io/instance': 'proxyfleet',
              },
            },
          },
        ],
        ports: [{ protocol: 'TCP', port: 8095 }],
      },
    ],
    clusterCidrs: ['10.42.0.0/16', '10.43.0.0/16', 'fd00:42::/56'],
    healthFrom: [],
  },
};

/** A ProxyGateway as the API server returns it: CRD defaults filled in. */
function pgw(
  name: string,
  spec: Partial<ProxyGateway['spec']> &
    Pick<ProxyGateway['spec'], 'plan' | 'port' | 'advertisedHost' | 'exits'>,
): ProxyGateway {
  return {
    apiVersion: 'proxyfleet.io/v1alpha1',
    kind: 'ProxyGateway',
    metadata: {
      name,
      namespace: 'proxy',
      uid: `00000000-0000-4000-8000-00000000000${name.length}`,
      generation: 1,
    },
    spec: {
      session: { defaultMinutes: 10, maxMinutes: 1440 },
      timeouts: { headersSeconds: 10, connectSeconds: 10, idleSeconds: 300, maxLifetimeSeconds: 86400 },
      limits: { maxConnectionsPerAccount: 1000 },
      replicas: { min: 2, max: 10 },
      autoscaling: { targetCPUUtilizationPercent: 70 },
      service: { type: 'ClusterIP' },
      ...spec,
    },
  };
}

const CASES: Record<string, ProxyGateway> = {
  'basic-autoscaled': pgw('basic', {
    plan: 'basic',
    port: 12321,
    advertisedHost: 'basic.proxy.example.com',
    exits: [{ name: 'direct', country: '*' }],
    autoscaling: { targetCPUUtilizationPercent: 65, targetActiveConnectionsPerPod: 2000 },
  }),
  'advanced-fixed-loadbalancer': pgw('advanced', {
    plan: 'advanced',
    port: 61236,
    advertisedHost: 'advanced.proxy.example.com',
    exits: [
      { name: 'us-east', country: 'us', state: 'newyork', city: 'newyorkcity', sourceAddress: '10.0.0.5' },
      { name: 'de', country: 'de', upstream: { url: 'http://user:pass@upstream.internal:3128' } },
    ],
    session: { defaultMinutes: 30, maxMinutes: 120 },
    timeouts: { headersSeconds: 5, connectSeconds: 8, idleSeconds: 120, maxLifetimeSeconds: 3600 },
    replicas: { min: 3, max: 3 },
    resources: { requests: { cpu: '500m', memory: '256Mi' }, limits: { memory: '1Gi' } },
    service: {
      type: 'LoadBalancer',
      annotations: { 'service.beta.kubernetes.io/aws-load-balancer-type': 'nlb' },
    },
  }),
  'mobile-behind-nlb-proxy-protocol': pgw('mobile', {
    plan: 'mobile',
    port: 10081,
    advertisedHost: 'mobile.proxy.example.com',
    exits: [{ name: 'direct', country: '*' }],
    proxyProtocol: { mode: 'required', trustedCidrs: ['10.0.0.0/16'] },
    service: {
      type: 'LoadBalancer',
      annotations: {
        'service.beta.kubernetes.io/aws-load-balancer-type': 'nlb',
        'service.beta.kubernetes.io/aws-load-balancer-proxy-protocol': '*',
      },
      externalTrafficPolicy: 'Cluster',
      loadBalancerSourceRanges: ['198.51.100.0/24', '203.0.113.0/24'],
    },
  }),
  'light-short-tunnels': pgw('light', {
    plan: 'light',
    port: 10080,
    advertisedHost: 'light.proxy.example.com',
    exits: [{ name: 'direct', country: '*' }],
    timeouts: { headersSeconds: 10, connectSeconds: 10, idleSeconds: 60, maxLifetimeSeconds: 120 },
    replicas: { min: 1, max: 4 },
  }),
  'datacenter-tls': pgw('datacenter', {
    plan: 'datacenter',
    port: 10082,
    advertisedHost: 'datacenter.proxy.example.com',
    exits: [{ name: 'direct', country: '*' }],
    tls: { secretName: 'datacenter-gateway-tls', refuseCredentialsInClear: true },
  }),
  // Exits bound to the node's addresses (docs/adr/0116): three nodes carry the label.
  'hostnetwork-exit-nodes': pgw('exits', {
    plan: 'advanced',
    port: 61236,
    advertisedHost: 'advanced.proxy.example.com',
    exits: [
      { name: 'a', country: 'us', sourceAddress: '203.0.113.10' },
      { name: 'b', country: 'us', sourceAddress: '203.0.113.11' },
      { name: 'c', country: 'de', sourceAddress: '2001:db8::12' },
    ],
    hostNetwork: true,
    healthPort: 9190,
    replicas: { min: 2, max: 5 },
    nodeSelector: { 'example.com/exit-addresses': 'true' },
    tolerations: [{ key: 'example.com/proxy-only', operator: 'Exists', effect: 'NoSchedule' }],
    priorityClassName: 'proxy-critical',
    podAnnotations: { 'cluster-autoscaler.kubernetes.io/safe-to-evict': 'false' },
  }),
  // Exit addresses on a secondary network instead (Multus attaches it to the pod's own namespace).
  'multus-placed': pgw('multus', {
    plan: 'mobile',
    port: 10081,
    advertisedHost: 'mobile.proxy.example.com',
    exits: [{ name: 'carrier', country: 'us', sourceAddress: '198.51.100.7' }],
    replicas: { min: 2, max: 2 },
    podAnnotations: { 'k8s.v1.cni.cncf.io/networks': 'proxy-exits/carrier-a' },
    podLabels: { 'example.com/team': 'edge' },
    affinity: {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [
            { matchExpressions: [{ key: 'example.com/uplink', operator: 'In', values: ['carrier-a'] }] },
          ],
        },
      },
    },
    topologySpreadConstraints: [
      { maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'DoNotSchedule' },
    ],
  }),
};
/** The nodes a hostNetwork case's pods may run on, as the reconciler counts them. */
const NODES: Record<string, number> = { 'hostnetwork-exit-nodes': 3 };

describe('desiredObjects golden files', () => {
  for (const [name, gateway] of Object.entries(CASES)) {
    test(name, async () => {
      const desired = desiredObjects(gateway, OPTIONS, NODES[name]);
      const rendered = stringify(
        {
          autoscaled: desired.autoscaled,
          absent: desired.absent.map((a) => `${a.resource.kind}/${a.name}`),
          objects: desired.objects.map((o) => o.object),
        },
        { singleQuote: true },
      );
      const file = path.join(import.meta.dirname, 'testdata', `${name}.golden.yaml`);
      if (mayUpdateGolden()) await writeFile(file, rendered);
      expect(rendered).toBe(await readFile(file, 'utf8'));
    });
  }
});

describe('desiredObjects invariants', () => {
  /** What a gateway pod reads: the ConfigMap's YAML and the upstreams Secret's files (gateway/src/spec.ts). */
  async function readAsGateway(gateway: ProxyGateway) {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'pgw-'));
    try {
      const desired = desiredObjects(gateway, OPTIONS).objects.map((o) => o.object);
      const secret = desired.find((o) => o.kind === 'Secret') as unknown as { data: Record<string, string> };
      for (const [key, value] of Object.entries(secret.data))
        await writeFile(path.join(dir, key), Buffer.from(value, 'base64'));
      const configMap = desired.find((o) => o.kind === 'ConfigMap') as unknown as {
        data: Record<string, string>;
      };
      const file = path.join(dir, 'gateway.yaml');
      await writeFile(file, configMap.data['gateway.yaml']!.replaceAll(UPSTREAMS_DIR, dir));
      return { parsed: (await readProxyGateways(file))[0]!, configMap: configMap.data['gateway.yaml']! };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  test("the plan's default throttle reaches the gateway's config (docs/adr/0035), and only when set", async () => {
    const gateway = structuredClone(CASES['basic-autoscaled']!);
    expect((await readAsGateway(gateway)).parsed.spec.throttle).toBeUndefined();
    gateway.spec.throttle = { bytesPerSecond: 1_048_576 };
    expect((await readAsGateway(gateway)).parsed.spec.throttle).toEqual({ bytesPerSecond: 1_048_576 });
  });

  test('upstream credentials go into a Secret the pod mounts, never into the ConfigMap', async () => {
    const gateway = CASES['advanced-fixed-loadbalancer']!;
    expect(JSON.stringify(gateway.spec.exits)).toContain('user:pass@');
    const { parsed, configMap } = await readAsGateway(gateway);
    expect(configMap).not.toContain('pass');
    expect(configMap).toContain(`urlFile: ${UPSTREAMS_DIR}/exit-1`);
    expect(parsed.spec.exits[1]!.upstream?.url).toBe('http://user:pass@upstream.internal:3128');
    const deployment = desiredObjects(gateway, OPTIONS).objects.find((o) => o.object.kind === 'Deployment')!
      .object as unknown as {
      spec: { template: { spec: { volumes: Array<{ name: string; secret?: unknown }> } } };
    };
    expect(deployment.spec.template.spec.volumes).toContainEqual({
      name: 'upstreams',
      secret: { secretName: 'advanced-gateway-upstreams' },
    });
    // A new password rolls the pods although the ConfigMap is the same.
    const hash = (g: ProxyGateway) =>
      (
        desiredObjects(g, OPTIONS).objects.find((o) => o.object.kind === 'Deployment')!.object as unknown as {
          spec: { template: { metadata: { annotations: Record<string, string> } } };
        }
      ).spec.template.metadata.annotations['proxyfleet.io/config-sha256'];
    const changed = structuredClone(gateway);
    changed.spec.exits[1]!.upstream = { url: 'http://user:new@upstream.internal:3128' };
    expect(gatewayConfigYaml(changed)).toBe(gatewayConfigYaml(gateway));
    expect(hash(changed)).not.toBe(hash(gateway));
  });

  test('the gateway config is exactly what gateway/src/spec.ts reads, without Kubernetes-only fields', async () => {
    for (const gateway of Object.values(CASES)) {
      const { parsed } = await readAsGateway(gateway);
      expect(Object.keys(parsed.spec).sort()).toEqual(
        [
          'advertisedHost',
          'exits',
          'limits',
          'plan',
          'port',
          'session',
          'timeouts',
          ...(gateway.spec.tls ? ['tls'] : []),
          ...(gateway.spec.proxyProtocol ? ['proxyProtocol'] : []),
        ].sort(),
      );
      expect(parsed.spec.exits).toEqual(gateway.spec.exits);
      expect(parsed.spec.proxyProtocol).toEqual(gateway.spec.proxyProtocol);
    }
  });

  test('TLS: the Secret is mounted where the gateway is told to read it; the plan option reaches the gateway, the Secret name does not', async () => {
    const gateway = CASES['datacenter-tls']!;
    const { parsed, configMap } = await readAsGateway(gateway);
    expect(parsed.spec.tls).toEqual({ refuseCredentialsInClear: true });
    expect(configMap).not.toContain('datacenter-gateway-tls');
    const pod = (
      desiredObjects(gateway, OPTIONS).objects.find((o) => o.object.kind === 'Deployment')!
        .object as unknown as {
        spec: {
          template: {
            spec: {
              volumes: Array<{ name: string; secret?: { secretName: string } }>;
              containers: Array<{
                env: Array<{ name: string; value?: string }>;
                volumeMounts: Array<{ name: string; mountPath: string }>;
              }>;
            };
          };
        };
      }
    ).spec.template.spec;
    expect(pod.volumes.find((v) => v.name === 'tls')?.secret?.secretName).toBe('datacenter-gateway-tls');
    const container = pod.containers[0]!;
    const mount = container.volumeMounts.find((m) => m.name === 'tls')!.mountPath;
    const env = Object.fromEntries(container.env.map((e) => [e.name, e.value]));
    expect(env.PROXYFLEET_GATEWAY_TLS_CERT).toBe(`${mount}/tls.crt`);
    expect(env.PROXYFLEET_GATEWAY_TLS_KEY).toBe(`${mount}/tls.key`);
    // What the gateway's own config accepts (both files, or neither).
    expect(() => loadGatewayConfig({ PROXYFLEET_GATEWAY_CONFIG: '/x.yaml', ...env })).not.toThrow();
    // Without spec.tls: no volume, no variables.
    const plain = desiredObjects(CASES['basic-autoscaled']!, OPTIONS).objects.find(
      (o) => o.object.kind === 'Deployment',
    )!;
    expect(JSON.stringify(plain.object)).not.toMatch(/TLS|"tls"/);
  });

  test('the gateway pods get PROXYFLEET_GATEWAY_ALLOW_CIDRS only when the operator is given ranges', () => {
    const env = (options: GatewayOptions) =>
      (
        desiredObjects(CASES['basic-autoscaled']!, options).objects.find(
          (o) => o.object.kind === 'Deployment',
        )!.object as unknown as {
          spec: {
            template: { spec: { containers: Array<{ env: Array<{ name: string; value?: string }> }> } };
          };
        }
      ).spec.template.spec.containers[0]!.env.filter((e) => e.name === 'PROXYFLEET_GATEWAY_ALLOW_CIDRS');
    expect(env(OPTIONS)).toEqual([]);
    expect(env({ ...OPTIONS, allowCidrs: [] })).toEqual([]);
    expect(env({ ...OPTIONS, allowCidrs: ['10.213.77.1/32', '192.0.2.0/24'] })).toEqual([
      { name: 'PROXYFLEET_GATEWAY_ALLOW_CIDRS', value: '10.213.77.1/32,192.0.2.0/24' },
    ]);
  });

  test('replicas are set only when no HPA is wanted', () => {
    const auto = desiredObjects(CASES['basic-autoscaled']!, OPTIONS);
    const fixed = desiredObjects(CASES['advanced-fixed-loadbalancer']!, OPTIONS);
    const replicas = (d: ReturnType<typeof desiredObjects>) =>
      (
        d.objects.find((o) => o.object.kind === 'Deployment')!.object as unknown as {
          spec: { replicas?: number };
        }
      ).spec.replicas;
    expect(replicas(auto)).toBeUndefined();
    expect(auto.objects.some((o) => o.object.kind === 'HorizontalPodAutoscaler')).toBe(true);
    expect(replicas(fixed)).toBe(3);
    expect(fixed.absent.map((a) => a.resource.kind)).toEqual(['HorizontalPodAutoscaler']);
  });

  test('a config change changes the pod template hash (pods roll), a replica change does not', () => {
    const hash = (g: ProxyGateway) =>
      (
        desiredObjects(g, OPTIONS).objects.find((o) => o.object.kind === 'Deployment')!.object as unknown as {
          spec: { template: { metadata: { annotations: Record<string, string> } } };
        }
      ).spec.template.metadata.annotations['proxyfleet.io/config-sha256'];
    const base = CASES['basic-autoscaled']!;
    expect(hash({ ...base, spec: { ...base.spec, replicas: { min: 4, max: 12 } } })).toBe(hash(base));
    expect(hash({ ...base, spec: { ...base.spec, exits: [{ name: 'direct', country: 'us' }] } })).not.toBe(
      hash(base),
    );
  });

  describe('placement (docs/adr/0116)', () => {
    type Pod = {
      hostNetwork?: boolean;
      dnsPolicy?: string;
      containers: Array<{
        ports: Array<{ name: string; containerPort: number; hostPort?: number }>;
        env: Array<{ name: string; value?: string; valueFrom?: unknown }>;
      }>;
    };
    type Deployment = {
      spec: {
        replicas?: number;
        strategy: unknown;
        template: { metadata: { annotations: Record<string, string> }; spec: Pod };
      };
    };
    const find = (d: ReturnType<typeof desiredObjects>, kind: string) =>
      d.objects.find((o) => o.object.kind === kind)?.object as unknown;
    const deployment = (d: ReturnType<typeof desiredObjects>) => find(d, 'Deployment') as Deployment;
    const hpa = (d: ReturnType<typeof desiredObjects>) =>
      (find(d, 'HorizontalPodAutoscaler') as { spec: { minReplicas: number; maxReplicas: number } }).spec;
    const exits = CASES['hostnetwork-exit-nodes']!;
    const withSpec = (g: ProxyGateway, spec: Partial<ProxyGateway['spec']>) => ({
      ...g,
      spec: { ...g.spec, ...spec },
    });

    test('hostNetwork: the HPA is capped at the nodes (one pod each) and stays when the cap meets min', () => {
      expect(hpa(desiredObjects(exits, OPTIONS, 3))).toMatchObject({ minReplicas: 2, maxReplicas: 3 });
      const oneNode = desiredObjects(exits, OPTIONS, 1);
      expect(hpa(oneNode)).toMatchObject({ minReplicas: 1, maxReplicas: 1 });
      expect(oneNode.autoscaled).toBe(true);
      expect(oneNode.replicas).toEqual({ min: 1, max: 1 });
      // Nodes not known: the spec's bounds.
      expect(hpa(desiredObjects(exits, OPTIONS))).toMatchObject({ minReplicas: 2, maxReplicas: 5 });
      const fixed = withSpec(exits, { replicas: { min: 3, max: 3 } });
      expect(deployment(desiredObjects(fixed, OPTIONS, 2)).spec.replicas).toBe(2);
      expect(deployment(desiredObjects(fixed, OPTIONS, 4)).spec.replicas).toBe(3);
      // Without hostNetwork the nodes bound nothing.
      const plain = withSpec(exits, { hostNetwork: false });
      expect(hpa(desiredObjects(plain, OPTIONS, 1))).toMatchObject({ minReplicas: 2, maxReplicas: 5 });
    });

    test('a node count change never rolls the pods; a placement change does, the config hash stays', () => {
      const template = (g: ProxyGateway, nodes?: number) =>
        deployment(desiredObjects(g, OPTIONS, nodes)).spec.template;
      expect(template(exits, 1)).toEqual(template(exits, 3));
      const moved = withSpec(exits, { nodeSelector: { 'example.com/exit-addresses': 'v2' } });
      expect(template(moved)).not.toEqual(template(exits));
      expect(template(moved).metadata.annotations['proxyfleet.io/config-sha256']).toBe(
        template(exits).metadata.annotations['proxyfleet.io/config-sha256'],
      );
    });

    test('hostNetwork: node DNS policy, every listening port a host port, rollouts without surge', () => {
      const d = deployment(desiredObjects(exits, OPTIONS, 3));
      const pod = d.spec.template.spec;
      expect(pod).toMatchObject({ hostNetwork: true, dnsPolicy: 'ClusterFirstWithHostNet' });
      expect(pod.containers[0]!.ports).toEqual([
        { name: 'proxy', containerPort: 61236, hostPort: 61236, protocol: 'TCP' },
        { name: 'health', containerPort: 9190, hostPort: 9190, protocol: 'TCP' },
      ]);
      expect(d.spec.strategy).toEqual({
        type: 'RollingUpdate',
        rollingUpdate: { maxSurge: 0, maxUnavailable: 1 },
      });
      // The gateway listens where the pod declares: PROXYFLEET_HEALTH_PORT is the health port.
      const env = Object.fromEntries(pod.containers[0]!.env.map((e) => [e.name, e.value]));
      expect(loadGatewayConfig({ ...env, PROXYFLEET_GATEWAY_CONFIG: '/x.yaml' }).PROXYFLEET_HEALTH_PORT).toBe(
        9190,
      );
      // Health and /prestop on the node's internal address only, not on every address of the node.
      expect(pod.containers[0]!.env).toContainEqual({
        name: 'PROXYFLEET_HEALTH_HOST',
        valueFrom: { fieldRef: { fieldPath: 'status.podIP' } },
      });
      const plain = deployment(desiredObjects(CASES['basic-autoscaled']!, OPTIONS, 1));
      expect(plain.spec.template.spec.containers[0]!.env.map((e) => e.name)).not.toContain(
        'PROXYFLEET_HEALTH_HOST',
      );
      expect(plain.spec.template.spec.hostNetwork).toBeUndefined();
      expect(plain.spec.template.spec.dnsPolicy).toBeUndefined();
      expect(JSON.stringify(plain.spec.template.spec.containers[0]!.ports)).not.toContain('hostPort');
    });
  });

  test("the gateway container's environment is a valid gateway configuration", () => {
    const deployment = desiredObjects(CASES['basic-autoscaled']!, OPTIONS).objects.find(
      (o) => o.object.kind === 'Deployment',
    )!.object as unknown as {
      spec: { template: { spec: { containers: Array<{ env: Array<{ name: string; value?: string }> }> } } };
    };
    const standIns: Record<string, string> = {
      DATABASE_URL: 'postgresql://proxyfleet@db:5432/proxyfleet',
      PROXYFLEET_GATEWAY_ID: 'basic-gateway-0',
    };
    const env = Object.fromEntries(
      deployment.spec.template.spec.containers[0]!.env.map((e) => [e.name, e.value ?? standIns[e.name]!]),
    );
    const config = loadGatewayConfig(env);
    expect(config.PROXYFLEET_GATEWAY_CONFIG).toBe('/etc/proxyfleet/gateway.yaml');
    expect(config.PROXYFLEET_HEALTH_PORT).toBe(9090);
    expect(config.PROXYFLEET_SHUTDOWN_GRACE_SECONDS).toBe(300);
  });

  test('behind a transaction pooler, the gateway reads its session URL from the Secret (docs/adr/0068)', () => {
    const env = (options: GatewayOptions) =>
      (
        desiredObjects(CASES['basic-autoscaled']!, options).objects.find(
          (o) => o.object.kind === 'Deployment',
        )!.object as unknown as {
          spec: {
            template: {
              spec: {
                containers: Array<{ env: Array<{ name: string; value?: string; valueFrom?: unknown }> }>;
              };
            };
          };
        }
      ).spec.template.spec.containers[0]!.env;
    const names = env(OPTIONS).map((e) => e.name);
    expect(names).not.toContain('PROXYFLEET_DATABASE_SESSION_URL');
    expect(names).not.toContain('PROXYFLEET_DB_POOLING');
    const pooled = env({
      ...OPTIONS,
      databaseSecret: { ...OPTIONS.databaseSecret, sessionKey: 'sessionUrl' },
      dbPooling: 'transaction',
    });
    expect(pooled.filter((e) => e.name.startsWith('PROXYFLEET_D') || e.name === 'DATABASE_URL')).toEqual([
      { name: 'DATABASE_URL', valueFrom: { secretKeyRef: { name: 'proxyfleet-database', key: 'url' } } },
      {
        name: 'PROXYFLEET_DATABASE_SESSION_URL',
        valueFrom: { secretKeyRef: { name: 'proxyfleet-database', key: 'sessionUrl' } },
      },
      { name: 'PROXYFLEET_DB_POOLING', value: 'transaction' },
    ]);
    const config = loadGatewayConfig({
      ...Object.fromEntries(pooled.filter((e) => e.value !== undefined).map((e) => [e.name, e.value!])),
      DATABASE_URL: 'postgresql://proxyfleet@pgbouncer:6432/proxyfleet',
      PROXYFLEET_DATABASE_SESSION_URL: 'postgresql://proxyfleet@pgbouncer:6432/proxyfleet_session',
    });
    expect(config.PROXYFLEET_DB_POOLING).toBe('transaction');
  });
});
