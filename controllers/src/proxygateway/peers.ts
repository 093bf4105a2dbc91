// What a hostNetwork ProxyGateway's placement depends on beyond itself (placement.ts): the other
// ProxyGateways (their host ports) and the nodes (how many its pods may run on). Neither is its
// child, so no owner reference brings their changes to its queue: this does. A node counts when
// what placement reads of it changes (labels, taints, cordon; not its heartbeats), a ProxyGateway
// when its spec does (a new generation) or it comes or goes; either re-queues every hostNetwork
// ProxyGateway, of every namespace the operator watches.
import { objectKey, type Informer } from '../runtime/informer.ts';
import type { ProxyGateway } from '../crds/types.generated.ts';
import type { NodeObject } from './placement.ts';

interface Member {
  gateways: Informer<ProxyGateway>;
  queue: { add(key: string): void };
}

export class PlacementPeers {
  private readonly members: Member[] = [];
  private readonly specs = new Map<string, { generation: number | undefined; hostNetwork: boolean }>();
  private readonly nodeFacts = new Map<string, string>();

  private readonly nodeInformer: Informer<NodeObject>;

  constructor(nodeInformer: Informer<NodeObject>) {
    this.nodeInformer = nodeInformer;
    nodeInformer.on((event, node) => {
      const key = objectKey(node);
      const facts = event === 'delete' ? undefined : placementFacts(node);
      if (this.nodeFacts.get(key) === facts) return;
      if (facts === undefined) this.nodeFacts.delete(key);
      else this.nodeFacts.set(key, facts);
      this.requeue();
    });
  }

  /** Adds one namespace's (or every namespace's) ProxyGateway informer and its controller's queue. */
  add(gateways: Informer<ProxyGateway>, queue: Member['queue']): void {
    this.members.push({ gateways, queue });
    gateways.on((event, pgw) => {
      const key = objectKey(pgw);
      const before = this.specs.get(key);
      const hostNetwork = pgw.spec.hostNetwork === true;
      if (event === 'delete') this.specs.delete(key);
      else if (before?.generation === pgw.metadata.generation) return;
      else this.specs.set(key, { generation: pgw.metadata.generation, hostNetwork });
      if (hostNetwork || before?.hostNetwork) this.requeue(key);
    });
  }

  /** Every ProxyGateway the operator sees. */
  gateways(): ProxyGateway[] {
    return this.members.flatMap((m) => m.gateways.list());
  }

  /** The nodes, once listed (undefined before, or without the right to). */
  nodes(): NodeObject[] | undefined {
    return this.nodeInformer.synced ? this.nodeInformer.list() : undefined;
  }

  private requeue(except?: string): void {
    for (const { gateways, queue } of this.members)
      for (const pgw of gateways.list()) {
        const key = objectKey(pgw);
        if (pgw.spec.hostNetwork && key !== except) queue.add(key);
      }
  }
}

/** What placement reads of a node, as one comparable string. */
function placementFacts(node: NodeObject): string {
  return JSON.stringify([
    node.metadata.labels ?? {},
    node.spec?.taints ?? [],
    node.spec?.unschedulable === true,
  ]);
}
