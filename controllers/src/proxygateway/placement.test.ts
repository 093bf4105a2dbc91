// placement.ts's rules, table-tested: which nodes a gateway's pods may use, the host ports of
// hostNetwork gateways and their conflicts, the replica cap, and the HostNetwork condition.
import { describe, expect, test } from '@jest/globals';
import type { ProxyGateway } from '../crds/types.generated.ts';
import {
  assessPlacement,
  hostNetworkCondition,
  hostPortConflicts,
  nodeMatches,
  placementConditions,
  placementEvents,
  replicaBounds,
  tolerates,
  type NodeObject,
  type Taint,
} from './placement.ts';

type Spec = ProxyGateway['spec'];

function gateway(name: string, spec: Partial<Spec> = {}, namespace = 'proxy'): ProxyGateway {
  return {
    apiVersion: 'proxyfleet.io/v1alpha1',
    kind: 'ProxyGateway',
    metadata: { name, namespace, generation: 1 },
    spec: {
      plan: 'basic',
      port: 12321,
      advertisedHost: 'basic.example.com',
      exits: [{ name: 'direct', country: '*' }],
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

function node(name: string, labels: Record<string, string> = {}, spec: NodeObject['spec'] = {}): NodeObject {
  return { apiVersion: 'v1', kind: 'Node', metadata: { name, labels }, spec };
}

describe('tolerates', () => {
  const taint: Taint = { key: 'dedicated', value: 'proxy', effect: 'NoSchedule' };
  const cases: Array<[string, Spec['tolerations'], Taint, boolean]> = [
    ['no tolerations', undefined, taint, false],
    ['Equal, same key and value', [{ key: 'dedicated', value: 'proxy' }], taint, true],
    ['Equal, another value', [{ key: 'dedicated', value: 'db' }], taint, false],
    ['Exists on the key', [{ key: 'dedicated', operator: 'Exists' }], taint, true],
    ['Exists without a key tolerates everything', [{ operator: 'Exists' }], taint, true],
    ['another effect', [{ key: 'dedicated', value: 'proxy', effect: 'NoExecute' }], taint, false],
    ['the same effect', [{ key: 'dedicated', value: 'proxy', effect: 'NoSchedule' }], taint, true],
    ['PreferNoSchedule never keeps a pod off', undefined, { key: 'x', effect: 'PreferNoSchedule' }, true],
    [
      'a taint without a value, Equal without one',
      [{ key: 'gpu' }],
      { key: 'gpu', effect: 'NoExecute' },
      true,
    ],
  ];
  test.each(cases)('%s', (_name, tolerations, t, expected) => {
    expect(tolerates(tolerations, t)).toBe(expected);
  });
});

describe('nodeMatches', () => {
  const term = (matchExpressions: unknown[], matchFields: unknown[] = []) =>
    ({
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [{ matchExpressions, matchFields }],
        },
      },
    }) as Spec['affinity'];
  const exit = node('n1', { 'example.com/exit': 'true', cores: '16' });
  const cases: Array<[string, Partial<Spec>, NodeObject, boolean]> = [
    ['no placement: any node', {}, exit, true],
    ['nodeSelector matches', { nodeSelector: { 'example.com/exit': 'true' } }, exit, true],
    ['nodeSelector value differs', { nodeSelector: { 'example.com/exit': 'false' } }, exit, false],
    ['nodeSelector label missing', { nodeSelector: { zone: 'a' } }, exit, false],
    ['a cordoned node', {}, node('n1', {}, { unschedulable: true }), false],
    [
      'a tainted node without a toleration',
      {},
      node('n1', {}, { taints: [{ key: 'dedicated', value: 'db', effect: 'NoSchedule' }] }),
      false,
    ],
    [
      'a tainted node with one',
      { tolerations: [{ key: 'dedicated', operator: 'Exists' }] },
      node('n1', {}, { taints: [{ key: 'dedicated', value: 'db', effect: 'NoSchedule' }] }),
      true,
    ],
    ['In', { affinity: term([{ key: 'example.com/exit', operator: 'In', values: ['true'] }]) }, exit, true],
    [
      'In, not listed',
      { affinity: term([{ key: 'example.com/exit', operator: 'In', values: ['no'] }]) },
      exit,
      false,
    ],
    [
      'NotIn, label missing',
      { affinity: term([{ key: 'zone', operator: 'NotIn', values: ['a'] }]) },
      exit,
      true,
    ],
    ['Exists', { affinity: term([{ key: 'cores', operator: 'Exists' }]) }, exit, true],
    ['DoesNotExist', { affinity: term([{ key: 'cores', operator: 'DoesNotExist' }]) }, exit, false],
    ['Gt', { affinity: term([{ key: 'cores', operator: 'Gt', values: ['8'] }]) }, exit, true],
    ['Lt', { affinity: term([{ key: 'cores', operator: 'Lt', values: ['8'] }]) }, exit, false],
    [
      'Gt on a label that is no integer',
      { affinity: term([{ key: 'example.com/exit', operator: 'Gt', values: ['1'] }]) },
      exit,
      false,
    ],
    [
      'matchFields on the name',
      { affinity: term([], [{ key: 'metadata.name', operator: 'In', values: ['n1'] }]) },
      exit,
      true,
    ],
    [
      'matchFields, another name',
      { affinity: term([], [{ key: 'metadata.name', operator: 'In', values: ['n2'] }]) },
      exit,
      false,
    ],
    ['an empty term matches nothing', { affinity: term([]) }, exit, false],
    [
      'terms are alternatives',
      {
        affinity: {
          nodeAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: {
              nodeSelectorTerms: [
                { matchExpressions: [{ key: 'zone', operator: 'Exists' }] },
                { matchExpressions: [{ key: 'cores', operator: 'Exists' }] },
              ],
            },
          },
        },
      },
      exit,
      true,
    ],
    [
      'preferred affinity never excludes a node',
      {
        affinity: {
          nodeAffinity: {
            preferredDuringSchedulingIgnoredDuringExecution: [
              { weight: 1, preference: { matchExpressions: [{ key: 'zone', operator: 'Exists' }] } },
            ],
          },
        },
      },
      exit,
      true,
    ],
  ];
  test.each(cases)('%s', (_name, placement, n, expected) => {
    expect(nodeMatches(placement, n)).toBe(expected);
  });
});

describe('hostPortConflicts', () => {
  const nodes = [node('a', { pool: 'exit' }), node('b', { pool: 'exit' }), node('c', { pool: 'edge' })];
  const self = gateway('basic', { hostNetwork: true, nodeSelector: { pool: 'exit' } });
  const cases: Array<[string, ProxyGateway, NodeObject[] | undefined, unknown[]]> = [
    [
      'same health port, shared nodes',
      gateway('light', { plan: 'light', port: 10080, hostNetwork: true }, 'other'),
      nodes,
      [{ gateway: 'other/light', port: 9090, ours: 'health', theirs: 'health', shared: ['a', 'b'] }],
    ],
    [
      'our proxy port is their health port',
      gateway('light', { plan: 'light', port: 10080, healthPort: 12321, hostNetwork: true }),
      nodes,
      [{ gateway: 'proxy/light', port: 12321, ours: 'proxy', theirs: 'health', shared: ['a', 'b'] }],
    ],
    [
      'another health port: no conflict',
      gateway('light', { plan: 'light', port: 10080, healthPort: 9091, hostNetwork: true }),
      nodes,
      [],
    ],
    ['a peer without hostNetwork binds nothing on the node', gateway('light', { port: 10080 }), nodes, []],
    [
      'no node both may run on',
      gateway('light', { port: 10080, hostNetwork: true, nodeSelector: { pool: 'edge' } }),
      nodes,
      [],
    ],
    [
      'nodes unknown: selectors that disagree keep them apart',
      gateway('light', { port: 10080, hostNetwork: true, nodeSelector: { pool: 'edge' } }),
      undefined,
      [],
    ],
    [
      'nodes unknown: otherwise they may share a node',
      gateway('light', { port: 10080, hostNetwork: true }),
      undefined,
      [{ gateway: 'proxy/light', port: 9090, ours: 'health', theirs: 'health' }],
    ],
    ['itself is no peer', self, nodes, []],
  ];
  test.each(cases)('%s', (_name, peer, n, expected) => {
    expect(hostPortConflicts(self, [peer], n)).toEqual(expected);
  });

  test('a gateway without hostNetwork has no host ports to conflict', () => {
    const peer = gateway('light', { port: 10080, hostNetwork: true });
    expect(hostPortConflicts(gateway('basic'), [peer], nodes)).toEqual([]);
  });
});

describe('replicaBounds', () => {
  const cases: Array<[string, Partial<Spec>, number | undefined, { min: number; max: number }]> = [
    ['no hostNetwork: the spec', { replicas: { min: 2, max: 10 } }, 1, { min: 2, max: 10 }],
    [
      'nodes unknown: the spec',
      { hostNetwork: true, replicas: { min: 2, max: 10 } },
      undefined,
      { min: 2, max: 10 },
    ],
    ['max capped at the nodes', { hostNetwork: true, replicas: { min: 2, max: 10 } }, 3, { min: 2, max: 3 }],
    ['both capped on one node', { hostNetwork: true, replicas: { min: 2, max: 10 } }, 1, { min: 1, max: 1 }],
    [
      'no node: one (Pending) pod, never 0',
      { hostNetwork: true, replicas: { min: 1, max: 3 } },
      0,
      { min: 1, max: 1 },
    ],
    ['enough nodes: unchanged', { hostNetwork: true, replicas: { min: 1, max: 3 } }, 5, { min: 1, max: 3 }],
  ];
  test.each(cases)('%s', (_name, spec, nodeCount, expected) => {
    expect(replicaBounds(gateway('g', spec), nodeCount)).toEqual(expected);
  });
});

describe('the HostNetwork condition', () => {
  const nodes = [node('a'), node('b')];
  const cases: Array<[string, Partial<Spec>, ProxyGateway[], NodeObject[] | undefined, string, RegExp]> = [
    [
      'fits',
      { hostNetwork: true, replicas: { min: 1, max: 2 } },
      [],
      nodes,
      'True/AsExpected',
      /one pod per node, 2 schedulable nodes .*\(a, b\)/,
    ],
    [
      'capped',
      { hostNetwork: true, replicas: { min: 1, max: 10 } },
      [],
      nodes,
      'True/ReplicasCapped',
      /replicas 1\.\.10 capped at 1\.\.2: one pod per node/,
    ],
    [
      'no node',
      { hostNetwork: true, nodeSelector: { x: 'y' } },
      [],
      nodes,
      'False/NoMatchingNodes',
      /stay Pending/,
    ],
    [
      'nodes not listed',
      { hostNetwork: true },
      [],
      undefined,
      'Unknown/NodesNotListed',
      /get, list and watch on nodes/,
    ],
    [
      'a conflict comes first',
      { hostNetwork: true },
      [gateway('light', { port: 10080, hostNetwork: true }, 'team')],
      nodes,
      'False/HostPortConflict',
      /host port 9090 \(this gateway's healthPort\) is also the healthPort of hostNetwork ProxyGateway team\/light, and both may run on node a, b/,
    ],
  ];
  test.each(cases)('%s', (_name, spec, peers, n, expected, message) => {
    const pgw = gateway('basic', spec);
    const c = hostNetworkCondition(pgw, assessPlacement(pgw, peers, n)!);
    expect(`${c.status}/${c.reason}`).toBe(expected);
    expect(c.message).toMatch(message);
  });

  test('Ready says HostPortConflict instead of NoReadyPods; PodsReady and PlanConflict stay', () => {
    const pgw = gateway('basic', { hostNetwork: true });
    const view = assessPlacement(pgw, [gateway('light', { port: 10080, hostNetwork: true })], nodes)!;
    const ready = (reason: string) => ({
      ready: '0/2',
      conditions: [{ type: 'Ready', status: 'False' as const, reason, message: '', lastTransitionTime: '' }],
    });
    const out = placementConditions(pgw, view, ready('NoReadyPods'));
    expect(out.map((c) => `${c.type}/${c.reason}`)).toEqual([
      'HostNetwork/HostPortConflict',
      'Ready/HostPortConflict',
    ]);
    expect(out[1]!.message).toMatch(/^0\/2 gateway pods ready; host port 9090/);
    for (const reason of ['PodsReady', 'PlanConflict'])
      expect(placementConditions(pgw, view, ready(reason)).map((c) => c.type)).toEqual(['HostNetwork']);
    expect(placementConditions(gateway('basic'), undefined, ready('NoReadyPods'))).toEqual([]);
  });

  test('a Warning Event when HostNetwork turns False, none while it stays', () => {
    const c = (status: 'True' | 'False', reason: string) => ({
      type: 'HostNetwork',
      status,
      reason,
      message: reason,
      lastTransitionTime: '',
    });
    expect(placementEvents([c('True', 'AsExpected')], [c('False', 'HostPortConflict')])).toEqual([
      { type: 'Warning', reason: 'HostPortConflict', message: 'HostPortConflict' },
    ]);
    expect(placementEvents(undefined, [c('False', 'NoMatchingNodes')])).toHaveLength(1);
    expect(placementEvents([c('False', 'NoMatchingNodes')], [c('False', 'NoMatchingNodes')])).toEqual([]);
    expect(placementEvents(undefined, [c('True', 'AsExpected')])).toEqual([]);
  });
});
