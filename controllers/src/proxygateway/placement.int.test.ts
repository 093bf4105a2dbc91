// ProxyGateway placement and hostNetwork on a real kube-apiserver (docs/adr/0116): the CEL rules
// of the placement fields, the fields reaching the pod template, replicas capped at the nodes the
// pods may run on (and following the nodes), and the HostNetwork condition naming the other
// ProxyGateway and the port when two hostNetwork gateways' host ports collide. There is no
// scheduler here: the Node objects are written by the test, as a kubelet would register them.
import { expect, test } from '@jest/globals';
import { describeKube } from '#test/kube/describe-kube.ts';
import { eventually } from '#test/kube/env.ts';
import { useOperator } from '#test/kube/operator.ts';
import type { KubeObject } from '../runtime/kube.ts';
import { RESOURCES } from '../runtime/resources.ts';
import { PROXY_GATEWAY, PROXY_GATEWAY_V1ALPHA1 } from '../crds/resources.ts';

const NS = 'exits';
const OTHER_NS = 'exits-b';

type Obj = KubeObject & { spec?: any; status?: any };
type Condition = { type: string; status: string; reason: string; message: string };

const nodeYaml = (name: string, labels: Record<string, string>, extra = '') =>
  [
    'apiVersion: v1',
    'kind: Node',
    `metadata: { name: ${name}, labels: ${JSON.stringify(labels)} }`,
    `spec: {${extra}}`,
    '',
  ].join('\n');

describeKube('ProxyGateway placement and hostNetwork on a real API server', () => {
  const fx = useOperator({
    // The nodes exist before the operator starts, as in a cluster: its first apply is capped.
    before: async ({ kube }) => {
      for (const ns of [NS, OTHER_NS])
        await kube.apply(`apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ${ns}\n`);
      await kube.apply(nodeYaml('exit-1', { 'example.com/exits': 'true' }));
      await kube.apply(nodeYaml('exit-2', { 'example.com/exits': 'true' }));
      // Cordoned, and tainted: neither takes a gateway pod.
      await kube.apply(nodeYaml('exit-3', { 'example.com/exits': 'true' }, 'unschedulable: true'));
      await kube.apply(
        nodeYaml(
          'exit-4',
          { 'example.com/exits': 'true' },
          'taints: [{ key: dedicated, value: db, effect: NoSchedule }]',
        ),
      );
      await kube.apply(nodeYaml('plain-1', {}));
      // The API server taints a new Node not-ready (admission TaintNodesByCondition); the node
      // lifecycle controller lifts it once the kubelet reports Ready. Play that part.
      await kube.kubectl(['taint', 'nodes', '--all', 'node.kubernetes.io/not-ready:NoSchedule-']);
    },
  });

  const get = (r: typeof PROXY_GATEWAY, name: string, ns = NS) => fx.admin.get<Obj>(r, ns, name);
  const applyPgw = (name: string, spec: Record<string, unknown>, ns = NS) =>
    fx.admin.apply(
      PROXY_GATEWAY_V1ALPHA1,
      {
        apiVersion: 'proxyfleet.io/v1alpha1',
        kind: 'ProxyGateway',
        metadata: { name, namespace: ns },
        spec,
      } as KubeObject,
      { fieldManager: 'test' },
    );
  const exitsSpec = {
    plan: 'advanced',
    port: 61236,
    advertisedHost: 'advanced.proxy.example.com',
    exits: [
      { name: 'a', country: 'us', sourceAddress: '203.0.113.10' },
      { name: 'b', country: 'us', sourceAddress: '203.0.113.11' },
      { name: 'c', country: 'de', sourceAddress: '203.0.113.12' },
    ],
    hostNetwork: true,
    nodeSelector: { 'example.com/exits': 'true' },
    replicas: { min: 1, max: 5 },
  };
  /** The gateway's condition of this type once `match` holds for it. */
  const condition = (name: string, type: string, match: (c: Condition) => boolean, ns = NS) =>
    eventually(
      async () => {
        const c = ((await get(PROXY_GATEWAY, name, ns))?.status?.conditions as Condition[] | undefined)?.find(
          (x) => x.type === type,
        );
        return c && match(c) ? c : undefined;
      },
      20_000,
      `${ns}/${name} ${type}`,
    );

  test('the CEL rules refuse placements that cannot work', async () => {
    const reject = async (spec: Record<string, unknown>, message: RegExp) => {
      await expect(applyPgw('invalid', { ...exitsSpec, ...spec })).rejects.toThrow(message);
    };
    await reject({ healthPort: 61236 }, /healthPort must differ from port/);
    await reject({ port: 80 }, /with hostNetwork, port and healthPort must be 1024 or above/);
    await reject({ healthPort: 900 }, /with hostNetwork, port and healthPort must be 1024 or above/);
    await reject(
      { podAnnotations: { 'k8s.v1.cni.cncf.io/networks': 'exits/carrier' } },
      /Multus attaches networks to pods with their own network namespace only/,
    );
    await reject(
      { podLabels: { 'app.kubernetes.io/name': 'x' } },
      /podLabels may not set the operator's labels/,
    );
    await reject(
      { podLabels: { 'proxyfleet.io/plan': 'basic' } },
      /podLabels may not set the operator's labels/,
    );
    await reject({ podLabels: { team: 'not a label value' } }, /podLabels/);
    await reject(
      { podAnnotations: { 'proxyfleet.io/config-sha256': 'x' } },
      /may not set proxyfleet.io\/ keys/,
    );
    await reject(
      { tolerations: [{ key: 'k', operator: 'Exists', value: 'v' }] },
      /operator Exists has no value/,
    );
    await reject({ tolerations: [{ value: 'v' }] }, /a toleration without a key needs operator Exists/);
    await reject({ priorityClassName: 'Not_A_Name' }, /priorityClassName/);
    await reject(
      { topologySpreadConstraints: [{ maxSkew: 1, topologyKey: 'zone', whenUnsatisfiable: 'Sometimes' }] },
      /whenUnsatisfiable/,
    );
    expect(await get(PROXY_GATEWAY, 'invalid')).toBeUndefined();
    // Without hostNetwork, Multus and low ports are the pod's own business.
    await applyPgw('multus', {
      ...exitsSpec,
      plan: 'mobile',
      port: 1080,
      hostNetwork: false,
      podAnnotations: { 'k8s.v1.cni.cncf.io/networks': 'exits/carrier' },
      podLabels: { 'example.com/team': 'edge' },
      affinity: {
        podAntiAffinity: {
          preferredDuringSchedulingIgnoredDuringExecution: [
            {
              weight: 50,
              podAffinityTerm: {
                topologyKey: 'kubernetes.io/hostname',
                labelSelector: { matchLabels: { 'proxyfleet.io/proxygateway': 'multus' } },
              },
            },
          ],
        },
      },
    });
    const d = await eventually(() => get(RESOURCES.deployment, 'multus-gateway'), 20_000, 'deployment');
    expect(d.spec.template.metadata.labels['example.com/team']).toBe('edge');
    expect(d.spec.template.metadata.annotations['k8s.v1.cni.cncf.io/networks']).toBe('exits/carrier');
    expect(d.spec.template.spec.affinity.podAntiAffinity).toBeDefined();
    expect(d.spec.template.spec.hostNetwork).toBeUndefined();
  });

  test('hostNetwork: the pod binds on the node, replicas are capped at the nodes its pods may run on, and follow them', async () => {
    await applyPgw('exits', {
      ...exitsSpec,
      tolerations: [{ key: 'example.com/proxy-only', operator: 'Exists', effect: 'NoSchedule' }],
      priorityClassName: 'system-cluster-critical',
    });
    const d = await eventually(() => get(RESOURCES.deployment, 'exits-gateway'), 20_000, 'deployment');
    const pod = d.spec.template.spec;
    expect(pod).toMatchObject({
      hostNetwork: true,
      dnsPolicy: 'ClusterFirstWithHostNet',
      nodeSelector: { 'example.com/exits': 'true' },
      priorityClassName: 'system-cluster-critical',
    });
    expect(pod.containers[0].ports).toEqual([
      expect.objectContaining({ name: 'proxy', containerPort: 61236, hostPort: 61236 }),
      expect.objectContaining({ name: 'health', containerPort: 9090, hostPort: 9090 }),
    ]);
    expect(d.spec.strategy.rollingUpdate).toEqual({ maxSurge: 0, maxUnavailable: 1 });
    // exit-1 and exit-2: exit-3 is cordoned, exit-4 tainted, plain-1 unlabelled.
    const hpa = await eventually(() => get(RESOURCES.hpa, 'exits-gateway'), 20_000, 'hpa');
    expect(hpa.spec).toMatchObject({ minReplicas: 1, maxReplicas: 2 });
    const capped = await condition('exits', 'HostNetwork', (c) => c.reason === 'ReplicasCapped');
    expect(capped.status).toBe('True');
    expect(capped.message).toMatch(
      /replicas 1\.\.5 capped at 1\.\.2: one pod per node, 2 schedulable nodes .*\(exit-1, exit-2\)/,
    );

    // A node joins the pool (the cordon lifted): the cap follows without a change to the ProxyGateway.
    await fx.kube.kubectl(['uncordon', 'exit-3']);
    await eventually(
      async () => (await get(RESOURCES.hpa, 'exits-gateway'))?.spec.maxReplicas === 3,
      20_000,
      'max 3',
    );
    // Relabelled out of the pool: down again.
    await fx.kube.kubectl(['label', 'node', 'exit-1', 'example.com/exits=false', '--overwrite']);
    await eventually(
      async () => (await get(RESOURCES.hpa, 'exits-gateway'))?.spec.maxReplicas === 2,
      20_000,
      'max 2',
    );
  });

  test('two hostNetwork gateways on one health port: both say so, naming the other; another healthPort clears both', async () => {
    await applyPgw(
      'dc',
      { ...exitsSpec, plan: 'datacenter', port: 10082, replicas: { min: 1, max: 1 } },
      OTHER_NS,
    );
    const theirs = await condition('dc', 'HostNetwork', (c) => c.reason === 'HostPortConflict', OTHER_NS);
    expect(theirs.status).toBe('False');
    expect(theirs.message).toMatch(
      /host port 9090 \(this gateway's healthPort\) is also the healthPort of hostNetwork ProxyGateway exits\/exits, and both may run on node exit-2, exit-3/,
    );
    // The older gateway learns of the newcomer too (its spec did not change).
    const ours = await condition('exits', 'HostNetwork', (c) => c.reason === 'HostPortConflict');
    expect(ours.message).toMatch(/ProxyGateway exits-b\/dc/);
    // No pod is ready (no kubelet here): Ready names the conflict rather than just NoReadyPods.
    const ready = await condition('dc', 'Ready', (c) => c.reason === 'HostPortConflict', OTHER_NS);
    expect(ready.message).toMatch(/^0\/\d gateway pods ready; host port 9090/);
    await eventually(
      async () => {
        const list = await fx.admin.list<
          Obj & { reason?: string; type?: string; involvedObject?: { name: string } }
        >(RESOURCES.event, { namespace: OTHER_NS });
        return list.items.some(
          (e) => e.reason === 'HostPortConflict' && e.type === 'Warning' && e.involvedObject?.name === 'dc',
        );
      },
      20_000,
      'Warning event',
    );

    await applyPgw(
      'dc',
      { ...exitsSpec, plan: 'datacenter', port: 10082, healthPort: 9091, replicas: { min: 1, max: 1 } },
      OTHER_NS,
    );
    await condition('dc', 'HostNetwork', (c) => c.status === 'True', OTHER_NS);
    await condition('exits', 'HostNetwork', (c) => c.status === 'True');
    await condition('dc', 'Ready', (c) => c.reason === 'NoReadyPods', OTHER_NS);
    const d = (await get(RESOURCES.deployment, 'dc-gateway', OTHER_NS))!;
    expect(d.spec.template.spec.containers[0].ports[1]).toMatchObject({
      containerPort: 9091,
      hostPort: 9091,
    });
  });

  test('hostNetwork turned off: the pods leave the node network and the HostNetwork condition goes', async () => {
    await applyPgw('dc', { ...exitsSpec, plan: 'datacenter', port: 10082, hostNetwork: false }, OTHER_NS);
    await eventually(
      async () => {
        const conditions = (await get(PROXY_GATEWAY, 'dc', OTHER_NS))?.status?.conditions as
          Condition[] | undefined;
        return (
          conditions?.some((c) => c.type === 'Ready') && !conditions.some((c) => c.type === 'HostNetwork')
        );
      },
      20_000,
      'HostNetwork condition removed',
    );
    const d = (await get(RESOURCES.deployment, 'dc-gateway', OTHER_NS))!;
    expect(d.spec.template.spec.hostNetwork).toBeUndefined();
    expect(d.spec.template.spec.containers[0].ports[0].hostPort).toBeUndefined();
    expect(d.spec.strategy.rollingUpdate).toEqual({ maxSurge: 1, maxUnavailable: 0 });
    // Not capped any more: replicas 1..5 whatever the nodes.
    await eventually(
      async () => (await get(RESOURCES.hpa, 'dc-gateway', OTHER_NS))?.spec.maxReplicas === 5,
      20_000,
      'max 5',
    );
  });
});
