// PlacementPeers: which informer events re-queue which hostNetwork ProxyGateways (no child
// relation brings a peer's or a node's change to a gateway's queue otherwise).
import { describe, expect, test } from '@jest/globals';
import type { Informer, InformerEvent, InformerHandler } from '../runtime/informer.ts';
import type { KubeObject } from '../runtime/kube.ts';
import type { ProxyGateway } from '../crds/types.generated.ts';
import { PlacementPeers } from './peers.ts';
import type { NodeObject } from './placement.ts';

/** The part of an Informer PlacementPeers uses: handlers, the cache, synced. */
class FakeInformer<T extends KubeObject> {
  readonly store = new Map<string, T>();
  private readonly handlers: Array<InformerHandler<T>> = [];
  synced = true;
  on(h: InformerHandler<T>) {
    this.handlers.push(h);
  }
  list() {
    return [...this.store.values()];
  }
  emit(event: InformerEvent, o: T) {
    const key = `${o.metadata.namespace ?? ''}/${o.metadata.name}`;
    if (event === 'delete') this.store.delete(key);
    else this.store.set(key, o);
    for (const h of this.handlers) h(event, o);
  }
  asInformer() {
    return this as unknown as Informer<T>;
  }
}

const gw = (name: string, namespace: string, generation: number, hostNetwork?: boolean) =>
  ({
    apiVersion: 'proxyfleet.io/v1alpha1',
    kind: 'ProxyGateway',
    metadata: { name, namespace, generation },
    spec: { hostNetwork },
  }) as unknown as ProxyGateway;
const node = (labels: Record<string, string>, status: Record<string, unknown> = {}) =>
  ({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1', labels }, status }) as unknown as NodeObject;

function setup() {
  const nodes = new FakeInformer<NodeObject>();
  const peers = new PlacementPeers(nodes.asInformer());
  // Two namespaces, as with controller.watchNamespaces: one informer and queue each.
  const [a, b] = [new FakeInformer<ProxyGateway>(), new FakeInformer<ProxyGateway>()];
  const queued: string[] = [];
  for (const [ns, inf] of [
    ['a', a],
    ['b', b],
  ] as const)
    peers.add(inf.asInformer(), { add: (key) => queued.push(`${ns}:${key}`) });
  a.emit('add', gw('host', 'a', 1, true));
  b.emit('add', gw('host', 'b', 1, true));
  a.emit('add', gw('plain', 'a', 1));
  queued.length = 0;
  return { nodes, peers, a, b, queued };
}

describe('PlacementPeers', () => {
  test("a new spec of a hostNetwork gateway re-queues the other hostNetwork gateways, in every namespace's queue", () => {
    const { a, queued } = setup();
    a.emit('update', gw('host', 'a', 2, true));
    expect(queued).toEqual(['b:b/host']);
  });

  test('a status write (same generation) re-queues nobody; nor does a gateway without hostNetwork', () => {
    const { a, queued } = setup();
    a.emit('update', gw('host', 'a', 1, true));
    a.emit('update', gw('plain', 'a', 2));
    expect(queued).toEqual([]);
  });

  test('turning hostNetwork off, or deleting a hostNetwork gateway, frees its ports for the others', () => {
    const { a, b, queued } = setup();
    a.emit('update', gw('host', 'a', 2, false));
    expect(queued).toEqual(['b:b/host']);
    queued.length = 0;
    b.emit('delete', gw('host', 'b', 1, true));
    expect(queued).toEqual([]); // a/host has hostNetwork off now: nobody left to tell
  });

  test('a node re-queues every hostNetwork gateway when its labels, taints or cordon change, not on heartbeats', () => {
    const { nodes, queued } = setup();
    nodes.emit('add', node({ pool: 'exit' }));
    expect(queued.sort()).toEqual(['a:a/host', 'b:b/host']);
    queued.length = 0;
    nodes.emit('update', node({ pool: 'exit' }, { conditions: [{ type: 'Ready', status: 'True' }] }));
    expect(queued).toEqual([]);
    nodes.emit('update', node({ pool: 'edge' }));
    expect(queued).toHaveLength(2);
    queued.length = 0;
    nodes.emit('delete', node({ pool: 'edge' }));
    expect(queued).toHaveLength(2);
  });

  test('every namespace is a peer; the nodes count once listed', () => {
    const { peers, nodes } = setup();
    expect(peers.gateways().map((g) => `${g.metadata.namespace}/${g.metadata.name}`)).toEqual([
      'a/host',
      'a/plain',
      'b/host',
    ]);
    nodes.synced = false;
    expect(peers.nodes()).toBeUndefined();
    nodes.synced = true;
    expect(peers.nodes()).toEqual([]);
  });
});
