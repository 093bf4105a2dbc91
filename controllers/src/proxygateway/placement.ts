// Where a ProxyGateway's pods may run and what hostNetwork costs (docs/adr/0116), pure and
// table-tested in placement.test.ts: the nodes a gateway's pods may use (nodeSelector, required
// node affinity, tolerations against taints, cordoned nodes), the host ports a hostNetwork gateway
// binds there, its conflicts with other hostNetwork ProxyGateways that may share a node, the
// replica bounds capped at those nodes (one pod per node), and the HostNetwork condition.
import { findCondition, transitions, type Condition, type ConditionInput } from '../runtime/conditions.ts';
import type { KubeObject } from '../runtime/kube.ts';
import type { ProxyGateway, ProxyGatewayStatus } from '../crds/types.generated.ts';
import type { StatusEvent } from './status.ts';

export const DEFAULT_HEALTH_PORT = 9090;
/** The port of /healthz, /readyz, /prestop and /metrics (one server in the gateway, gateway/src/main.ts). */
export const healthPort = (pgw: ProxyGateway) => pgw.spec.healthPort ?? DEFAULT_HEALTH_PORT;
export const HOST_NETWORK_CONDITION = 'HostNetwork';

type Spec = ProxyGateway['spec'];
type Placement = Pick<Spec, 'nodeSelector' | 'affinity' | 'tolerations'>;
type Toleration = NonNullable<Spec['tolerations']>[number];
type Term = NonNullable<
  NonNullable<NonNullable<Spec['affinity']>['nodeAffinity']>['requiredDuringSchedulingIgnoredDuringExecution']
>['nodeSelectorTerms'][number];
type Requirement = NonNullable<Term['matchExpressions']>[number];

export interface Taint {
  key: string;
  value?: string;
  effect: string;
}

/** The fields of a Node that placement reads. */
export interface NodeObject extends KubeObject {
  spec?: { unschedulable?: boolean; taints?: Taint[] };
}

/** Whether a toleration list lets a pod onto a node with this taint (the scheduler's rule). */
export function tolerates(tolerations: readonly Toleration[] | undefined, taint: Taint): boolean {
  // PreferNoSchedule only steers the scheduler; it never keeps a pod off.
  if (taint.effect === 'PreferNoSchedule') return true;
  return (tolerations ?? []).some((t) => {
    if (t.effect && t.effect !== taint.effect) return false;
    if (t.operator === 'Exists') return !t.key || t.key === taint.key;
    return t.key === taint.key && (t.value ?? '') === (taint.value ?? '');
  });
}

function requirementMatches(r: Requirement, value: string | undefined): boolean {
  const values = r.values ?? [];
  switch (r.operator) {
    case 'In':
      return value !== undefined && values.includes(value);
    case 'NotIn':
      return value === undefined || !values.includes(value);
    case 'Exists':
      return value !== undefined;
    case 'DoesNotExist':
      return value === undefined;
    case 'Gt':
    case 'Lt': {
      const [have, bound] = [Number(value), Number(values[0])];
      if (value === undefined || !Number.isInteger(have) || !Number.isInteger(bound)) return false;
      return r.operator === 'Gt' ? have > bound : have < bound;
    }
  }
}

/** A nodeSelectorTerm: every expression on the labels and every field (metadata.name) matches; an empty term matches nothing. */
function termMatches(term: Term, node: NodeObject): boolean {
  const labels = node.metadata.labels ?? {};
  const fields: Record<string, string> = { 'metadata.name': node.metadata.name };
  const exprs = term.matchExpressions ?? [];
  const byField = term.matchFields ?? [];
  if (exprs.length + byField.length === 0) return false;
  return (
    exprs.every((r) => requirementMatches(r, labels[r.key])) &&
    byField.every((r) => requirementMatches(r, fields[r.key]))
  );
}

/** Whether the scheduler may put a pod with this placement on the node (cordoned nodes excluded). */
export function nodeMatches(placement: Placement, node: NodeObject): boolean {
  if (node.spec?.unschedulable) return false;
  const labels = node.metadata.labels ?? {};
  if (Object.entries(placement.nodeSelector ?? {}).some(([k, v]) => labels[k] !== v)) return false;
  const terms =
    placement.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
  if (terms && !terms.some((t) => termMatches(t, node))) return false;
  return (node.spec?.taints ?? []).every((taint) => tolerates(placement.tolerations, taint));
}

/** The names of the nodes the gateway's pods may run on, sorted. */
export function placementNodes(placement: Placement, nodes: readonly NodeObject[]): string[] {
  return nodes
    .filter((n) => nodeMatches(placement, n))
    .map((n) => n.metadata.name)
    .sort();
}

export interface HostPort {
  port: number;
  name: 'proxy' | 'health';
}

/** The ports a hostNetwork gateway binds on its node (none without hostNetwork). */
export function hostPorts(pgw: ProxyGateway): HostPort[] {
  if (!pgw.spec.hostNetwork) return [];
  return [
    { port: pgw.spec.port, name: 'proxy' },
    { port: healthPort(pgw), name: 'health' },
  ];
}

export interface HostPortConflict {
  /** The other ProxyGateway, namespace/name. */
  gateway: string;
  port: number;
  ours: HostPort['name'];
  theirs: HostPort['name'];
  /** The nodes both may run on; undefined when the nodes are not known. */
  shared?: string[];
}

const keyOf = (pgw: ProxyGateway) => `${pgw.metadata.namespace}/${pgw.metadata.name}`;

/**
 * Host ports this gateway shares with other hostNetwork ProxyGateways whose pods may run on the
 * same node. With the nodes known, "may share" is a node both match; without, only nodeSelectors
 * that disagree on a label tell two gateways apart.
 */
export function hostPortConflicts(
  pgw: ProxyGateway,
  peers: readonly ProxyGateway[],
  nodes: readonly NodeObject[] | undefined,
): HostPortConflict[] {
  const ours = hostPorts(pgw);
  if (ours.length === 0) return [];
  const mine = nodes && new Set(placementNodes(pgw.spec, nodes));
  const out: HostPortConflict[] = [];
  for (const peer of [...peers].sort((a, b) => keyOf(a).localeCompare(keyOf(b)))) {
    if (keyOf(peer) === keyOf(pgw)) continue;
    const clashes = hostPorts(peer).flatMap((theirs) =>
      ours
        .filter((o) => o.port === theirs.port)
        .map((o) => ({ port: o.port, ours: o.name, theirs: theirs.name })),
    );
    if (clashes.length === 0) continue;
    let shared: string[] | undefined;
    if (mine) {
      shared = placementNodes(peer.spec, nodes).filter((n) => mine.has(n));
      if (shared.length === 0) continue;
    } else if (selectorsDisjoint(pgw.spec.nodeSelector, peer.spec.nodeSelector)) continue;
    for (const c of clashes) out.push({ gateway: keyOf(peer), ...c, ...(shared ? { shared } : {}) });
  }
  return out;
}

function selectorsDisjoint(a: Record<string, string> = {}, b: Record<string, string> = {}): boolean {
  return Object.entries(a).some(([k, v]) => k in b && b[k] !== v);
}

/**
 * The replica bounds the objects get. With hostNetwork a node holds one pod of the gateway (its
 * ports), so more pods than nodes would stay Pending and a rollout would never finish: both
 * bounds are capped at the nodes the pods may run on (at least 1: the HPA cannot go to 0).
 */
export function replicaBounds(
  pgw: ProxyGateway,
  nodeCount: number | undefined,
): { min: number; max: number } {
  const { min, max } = pgw.spec.replicas;
  if (!pgw.spec.hostNetwork || nodeCount === undefined) return { min, max };
  const cap = Math.max(1, nodeCount);
  return { min: Math.min(min, cap), max: Math.min(max, cap) };
}

/** What the reconciler learned about a hostNetwork gateway's placement. */
export interface PlacementView {
  /** The nodes its pods may run on; undefined when the operator has no node list. */
  nodes: string[] | undefined;
  conflicts: HostPortConflict[];
  bounds: { min: number; max: number };
}

/** The placement of a hostNetwork gateway (undefined without hostNetwork: nothing to bound). */
export function assessPlacement(
  pgw: ProxyGateway,
  peers: readonly ProxyGateway[],
  nodes: readonly NodeObject[] | undefined,
): PlacementView | undefined {
  if (!pgw.spec.hostNetwork) return undefined;
  const matching = nodes && placementNodes(pgw.spec, nodes);
  return {
    nodes: matching,
    conflicts: hostPortConflicts(pgw, peers, nodes),
    bounds: replicaBounds(pgw, matching?.length),
  };
}

const FIELD = { proxy: 'port', health: 'healthPort' } as const;
const listed = (names: string[]) =>
  names.length > 3 ? `${names.slice(0, 3).join(', ')} and ${names.length - 3} more` : names.join(', ');

export function conflictMessage(c: HostPortConflict): string {
  const where = c.shared
    ? `node ${listed(c.shared)}`
    : 'the same nodes (their nodeSelectors do not exclude each other)';
  return (
    `host port ${c.port} (this gateway's ${FIELD[c.ours]}) is also the ${FIELD[c.theirs]} of hostNetwork ` +
    `ProxyGateway ${c.gateway}, and both may run on ${where}: the scheduler keeps their pods apart, so ` +
    `pods of one stay Pending there; change the ${FIELD[c.ours]} of one, or give them nodes of their own`
  );
}

/** The HostNetwork condition: port conflicts first, then the nodes, then whether the replicas were capped. */
export function hostNetworkCondition(pgw: ProxyGateway, view: PlacementView): ConditionInput {
  const type = HOST_NETWORK_CONDITION;
  if (view.conflicts.length > 0)
    return {
      type,
      status: 'False',
      reason: 'HostPortConflict',
      message: view.conflicts.map(conflictMessage).join('; '),
    };
  if (view.nodes === undefined)
    return {
      type,
      status: 'Unknown',
      reason: 'NodesNotListed',
      message:
        'the operator has no node list (it needs get, list and watch on nodes): replicas are not capped at the nodes the pods may run on',
    };
  const n = view.nodes.length;
  if (n === 0)
    return {
      type,
      status: 'False',
      reason: 'NoMatchingNodes',
      message: 'no schedulable node matches nodeSelector, affinity and tolerations: the pods stay Pending',
    };
  const { min, max } = pgw.spec.replicas;
  const nodes = `${n} schedulable node${n === 1 ? '' : 's'} the pods may run on (${listed(view.nodes)})`;
  if (max > view.bounds.max)
    return {
      type,
      status: 'True',
      reason: 'ReplicasCapped',
      message:
        `replicas ${min}..${max} capped at ${view.bounds.min}..${view.bounds.max}: one pod per node, ` +
        `${nodes}`,
    };
  return { type, status: 'True', reason: 'AsExpected', message: `one pod per node, ${nodes}` };
}

/**
 * The conditions placement adds to a computed status (status.ts's): HostNetwork, and Ready's
 * reason HostPortConflict instead of NoReadyPods when no pod is ready and a port conflict is the
 * likely cause. Without hostNetwork: none (the reconciler drops a former HostNetwork condition).
 */
export function placementConditions(
  pgw: ProxyGateway,
  view: PlacementView | undefined,
  status: Pick<ProxyGatewayStatus, 'conditions' | 'ready'>,
): ConditionInput[] {
  if (!view) return [];
  const hostNetwork = hostNetworkCondition(pgw, view);
  const ready = findCondition(status.conditions, 'Ready');
  if (view.conflicts.length === 0 || ready?.reason !== 'NoReadyPods') return [hostNetwork];
  return [
    hostNetwork,
    {
      type: 'Ready',
      status: 'False',
      reason: 'HostPortConflict',
      message: `${status.ready ?? '0/0'} gateway pods ready; ${hostNetwork.message}`,
    },
  ];
}

/** Warning Events for a HostNetwork condition turning False (a port conflict, no node to run on). */
export function placementEvents(
  before: readonly Condition[] | undefined,
  after: readonly Condition[],
): StatusEvent[] {
  return transitions(before, after)
    .filter((c) => c.type === HOST_NETWORK_CONDITION && c.status === 'False')
    .map((c) => ({ type: 'Warning', reason: c.reason, message: c.message }));
}
