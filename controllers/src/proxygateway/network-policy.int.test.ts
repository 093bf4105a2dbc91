// The gateways' NetworkPolicy on a real kube-apiserver (network-policy.ts, docs/adr/0120
// addendum): created with the other children and owned by the ProxyGateway, following the spec's
// ports, put back when deleted, removed when the pods turn hostNetwork or the operator runs with
// the policy off, and never touched when someone else made one of the same name. The operator
// runs as the user bound only to the chart's RBAC. Nothing here enforces a policy (no CNI).
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { describeKube } from '#test/kube/describe-kube.ts';
import { eventually, startKube, type KubeEnv } from '#test/kube/env.ts';
import { createTestOperator, kubeClientFor, TEST_GATEWAY_OPTIONS } from '#test/kube/operator.ts';
import { createTestDatabase, type TestDatabase } from '#test/db.ts';
import type { Operator } from '../operator.ts';
import type { KubeClient, KubeObject } from '../runtime/kube.ts';
import { RESOURCES } from '../runtime/resources.ts';
import { API_VERSION, PROXY_GATEWAY } from '../crds/resources.ts';
import type { GatewayNetworkPolicyOptions } from './network-policy.ts';

const NS = 'netpol';
type Obj = KubeObject & { spec?: any; status?: any };

const POLICY: GatewayNetworkPolicyOptions = {
  egress: [{ to: [{ ipBlock: { cidr: '10.20.0.0/16' } }], ports: [{ protocol: 'TCP', port: 5432 }] }],
  clusterCidrs: ['10.42.0.0/16', '10.43.0.0/16'],
  healthFrom: [],
};

describeKube('ProxyGateway NetworkPolicy on a real API server', () => {
  let kube: KubeEnv;
  let db: TestDatabase;
  let admin: KubeClient;
  let operator: Operator | undefined;

  const startOperator = async (networkPolicy: GatewayNetworkPolicyOptions | undefined) => {
    await operator?.stop();
    operator = createTestOperator({
      kubeconfig: kube.operatorKubeconfig,
      pool: db.pool,
      overrides: { gateway: { ...TEST_GATEWAY_OPTIONS, allowCidrs: ['10.42.7.0/24'], networkPolicy } },
    });
    await operator.start();
  };

  beforeAll(async () => {
    [kube, db] = await Promise.all([startKube(), createTestDatabase()]);
    admin = kubeClientFor(kube.adminKubeconfig);
    await kube.apply(`apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ${NS}\n`);
    await startOperator(POLICY);
  }, 120_000);

  afterAll(async () => {
    await operator?.stop();
    await kube?.stop();
    await db?.drop();
  });

  const get = (r: typeof PROXY_GATEWAY, name: string) => admin.get<Obj>(r, NS, name);
  const applyPgw = (name: string, spec: Record<string, unknown> = {}) =>
    admin.apply(
      PROXY_GATEWAY,
      {
        apiVersion: API_VERSION,
        kind: 'ProxyGateway',
        metadata: { name, namespace: NS },
        spec: {
          plan: name === 'basic' ? 'basic' : 'light',
          port: 12321,
          advertisedHost: `${name}.proxy.example.com`,
          exits: [{ name: 'us', country: 'us' }],
          replicas: { min: 1, max: 1 },
          ...spec,
        },
      } as KubeObject,
      { fieldManager: 'test' },
    );
  const ingressPorts = (p: Obj) =>
    p.spec.ingress.map((r: { ports: Array<{ port: number }> }) => r.ports[0]!.port);
  /** The policy once its ingress admits these ports (the public one, then health). */
  const policyWith = (ports: number[]) =>
    eventually(
      async () => {
        const p = await get(RESOURCES.networkPolicy, 'basic-gateway');
        return p && JSON.stringify(ingressPorts(p)) === JSON.stringify(ports) ? p : undefined;
      },
      20_000,
      `policy admitting ${ports.join(', ')}`,
    );
  const gone = (name: string, what: string) =>
    eventually(async () => (await get(RESOURCES.networkPolicy, name)) === undefined, 20_000, what);

  test("created with the gateway, owned by it, selecting exactly its Deployment's pods", async () => {
    await applyPgw('basic');
    const policy = await policyWith([12321, 9090]);
    const pgw = (await get(PROXY_GATEWAY, 'basic'))!;
    expect(policy.metadata.ownerReferences).toEqual([
      expect.objectContaining({
        kind: 'ProxyGateway',
        name: 'basic',
        uid: pgw.metadata.uid,
        controller: true,
      }),
    ]);
    const deployment = await eventually(() => get(RESOURCES.deployment, 'basic-gateway'));
    expect(policy.spec.podSelector).toEqual(deployment.spec.selector);
    expect(policy.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(policy.spec.egress).toEqual([
      {
        ports: [
          { protocol: 'UDP', port: 53 },
          { protocol: 'TCP', port: 53 },
        ],
      },
      POLICY.egress[0],
      {
        to: [
          { ipBlock: { cidr: '0.0.0.0/0', except: ['10.42.0.0/16', '10.43.0.0/16'] } },
          { ipBlock: { cidr: '::/0' } },
        ],
      },
      { to: [{ ipBlock: { cidr: '10.42.7.0/24' } }] },
    ]);
  });

  test("follows the spec's ports, and is put back when deleted", async () => {
    await applyPgw('basic', { port: 12400, healthPort: 9190 });
    await policyWith([12400, 9190]);
    const before = (await get(RESOURCES.networkPolicy, 'basic-gateway'))!;
    await admin.delete(RESOURCES.networkPolicy, NS, 'basic-gateway');
    const after = await eventually(async () => {
      const p = await get(RESOURCES.networkPolicy, 'basic-gateway');
      return p && p.metadata.uid !== before.metadata.uid ? p : undefined;
    });
    expect(ingressPorts(after)).toEqual([12400, 9190]);
  });

  test('removed when the pods turn hostNetwork, back when they leave it', async () => {
    await applyPgw('basic', { port: 12400, healthPort: 9190, hostNetwork: true });
    await gone('basic-gateway', 'policy of the hostNetwork gateway removed');
    await eventually(
      async () => (await get(RESOURCES.deployment, 'basic-gateway'))?.spec.template.spec.hostNetwork,
    );
    await applyPgw('basic', { port: 12400, healthPort: 9190 });
    await policyWith([12400, 9190]);
  });

  test('switched off: the operator removes its own policies and leaves a same-name one it did not write', async () => {
    // Someone else's policy with the name a gateway's would have: never adopted, never deleted.
    await kube.apply(
      [
        'apiVersion: networking.k8s.io/v1',
        'kind: NetworkPolicy',
        `metadata: { name: foreign-gateway, namespace: ${NS} }`,
        'spec: { podSelector: {}, policyTypes: [Ingress] }',
        '',
      ].join('\n'),
    );
    await applyPgw('foreign');
    const notOwned = await eventually(async () => {
      const conditions = (await get(PROXY_GATEWAY, 'foreign'))?.status?.conditions ?? [];
      return conditions.find(
        (c: { type: string; status: string }) => c.type === 'Applied' && c.status === 'False',
      );
    });
    expect(notOwned.message).toContain('NetworkPolicy foreign-gateway');

    await startOperator(undefined);
    await gone('basic-gateway', 'owned policy removed with the policy off');
    // Off, nothing blocks the foreign gateway any more: it is applied, and the policy is still there.
    await eventually(async () => {
      const conditions = (await get(PROXY_GATEWAY, 'foreign'))?.status?.conditions ?? [];
      return conditions.some(
        (c: { type: string; status: string }) => c.type === 'Applied' && c.status === 'True',
      );
    });
    expect((await get(RESOURCES.networkPolicy, 'foreign-gateway'))?.spec.policyTypes).toEqual(['Ingress']);
    // The other children stay.
    expect(await get(RESOURCES.deployment, 'basic-gateway')).toBeDefined();

    await startOperator(POLICY);
    await policyWith([12400, 9190]);
  });
});
