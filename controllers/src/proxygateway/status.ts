// A ProxyGateway's status rules, pure (cert-manager's way: conditions computed from what was
// observed, table-tested in status.test.ts). The reconciler gathers the inputs (the CR as it is,
// its Deployment from the informer, how applying went, who owns the plan's endpoint row), and
// writes the result and records the events; nothing here reads or writes anything.
//
// Status always describes the observed Deployment (a failed apply does not make running pods
// look absent); how applying went is its own condition, Applied. Ready is False with reason
// PlanConflict while another ProxyGateway owns the plan's public endpoint. The exits, as the pods'
// heartbeats report them, are exit-status.ts's (docs/adr/0117).
import { findCondition, setConditions, transitions, type ConditionInput } from '../runtime/conditions.ts';
import type { EventType } from '../runtime/events.ts';
import type { KubeObject } from '../runtime/kube.ts';
import type { ProxyGateway, ProxyGatewayStatus } from '../crds/types.generated.ts';
import { summarizeExits, type PodExits } from './exit-status.ts';

/** The fields of the gateway's Deployment that status reads (the observed pods). */
export interface ObservedDeployment {
  metadata: Pick<KubeObject['metadata'], 'generation'>;
  spec?: { replicas?: number };
  status?: {
    observedGeneration?: number;
    replicas?: number;
    readyReplicas?: number;
    updatedReplicas?: number;
    conditions?: Array<{ type: string; status: string; reason?: string; message?: string }>;
  };
}

/** How applying the desired objects went. */
export type ApplyOutcome =
  | { kind: 'applied' }
  /** Same-name objects we did not create, left untouched ("Deployment basic-gateway"). */
  | { kind: 'notOwned'; objects: readonly string[] }
  | { kind: 'failed'; error: string };

export interface StatusInputs {
  /** The ProxyGateway as last read: its spec, generation and current conditions. */
  gateway: Pick<ProxyGateway, 'metadata' | 'spec' | 'status'>;
  /** Its Deployment as the informer last saw it; undefined before it exists. */
  deployment: ObservedDeployment | undefined;
  applied: ApplyOutcome;
  /** Who owns the plan's endpoint row when it is not this gateway (endpoint.ts); undefined when it is. */
  planOwner?: string | undefined;
  /**
   * The heartbeats of the gateway's pods (exit-reports.ts); undefined when they were not read
   * (the reconcile failed before): the exits' status is then kept as it is.
   */
  exits?: readonly PodExits[];
}

export interface StatusEvent {
  type: EventType;
  reason: string;
  message: string;
}

export function appliedCondition(outcome: ApplyOutcome): ConditionInput {
  switch (outcome.kind) {
    case 'failed':
      return {
        type: 'Applied',
        status: 'False',
        reason: 'ApplyFailed',
        message: outcome.error.slice(0, 512),
      };
    case 'notOwned':
      return {
        type: 'Applied',
        status: 'False',
        reason: 'ObjectNotOwned',
        message: `not created by this ProxyGateway, left untouched: ${outcome.objects.join(', ')}; delete or rename it`,
      };
    case 'applied':
      return { type: 'Applied', status: 'True', reason: 'AsExpected', message: 'every object applied' };
  }
}

/** Desired and ready pods as the Deployment reports them (desired: its spec, set by the HPA when autoscaled). */
function pods(deployment: ObservedDeployment | undefined): { replicas: number; ready: number } {
  const ds = deployment?.status ?? {};
  return { replicas: deployment?.spec?.replicas ?? ds.replicas ?? 0, ready: ds.readyReplicas ?? 0 };
}

/** The four conditions, in this order: Ready, Progressing, Degraded, Applied. */
export function gatewayConditions(inputs: StatusInputs): ConditionInput[] {
  const { deployment, planOwner } = inputs;
  const ds = deployment?.status ?? {};
  const { replicas, ready } = pods(deployment);
  const rolloutDone =
    deployment !== undefined &&
    (ds.observedGeneration ?? 0) >= (deployment.metadata.generation ?? 0) &&
    (ds.updatedReplicas ?? 0) >= replicas &&
    ready >= replicas;
  const failed = ds.conditions?.find(
    (c) =>
      (c.type === 'ReplicaFailure' && c.status === 'True') ||
      (c.type === 'Progressing' && c.reason === 'ProgressDeadlineExceeded'),
  );
  return [
    planOwner !== undefined
      ? {
          type: 'Ready',
          status: 'False',
          reason: 'PlanConflict',
          message: `plan ${inputs.gateway.spec.plan}'s public endpoint belongs to ${planOwner}; this gateway (${ready}/${replicas} pods ready) is not advertised`,
        }
      : ready > 0
        ? {
            type: 'Ready',
            status: 'True',
            reason: 'PodsReady',
            message: `${ready}/${replicas} gateway pods ready`,
          }
        : {
            type: 'Ready',
            status: 'False',
            reason: 'NoReadyPods',
            message: `0/${replicas} gateway pods ready`,
          },
    rolloutDone
      ? {
          type: 'Progressing',
          status: 'False',
          reason: 'RolledOut',
          message: 'every pod runs the current configuration',
        }
      : {
          type: 'Progressing',
          status: 'True',
          reason: 'RollingOut',
          message: `${ds.updatedReplicas ?? 0}/${replicas} pods updated, ${ready} ready`,
        },
    failed
      ? {
          type: 'Degraded',
          status: 'True',
          reason: failed.reason ?? failed.type,
          message: failed.message ?? '',
        }
      : {
          type: 'Degraded',
          status: 'False',
          reason: 'AsExpected',
          message: 'the Deployment reports no failure',
        },
    appliedCondition(inputs.applied),
  ];
}

/**
 * The whole status to write: the printer columns (ready, endpoint, exits), the exits and the
 * merged conditions.
 */
export function gatewayStatus(inputs: StatusInputs, now: Date = new Date()): ProxyGatewayStatus {
  const { gateway } = inputs;
  const { replicas, ready } = pods(inputs.deployment);
  const conditions = gatewayConditions(inputs);
  const was = gateway.status ?? {};
  let exits: Pick<ProxyGatewayStatus, 'exits' | 'exitsReady' | 'failedExits'> = {
    ...(was.exits ? { exits: was.exits } : {}),
    ...(was.exitsReady !== undefined ? { exitsReady: was.exitsReady } : {}),
    ...(was.failedExits !== undefined ? { failedExits: was.failedExits } : {}),
  };
  if (inputs.exits) {
    const summary = summarizeExits(gateway.spec.exits, inputs.exits, was.exits);
    exits = { exits: summary.exits, exitsReady: summary.exitsReady, failedExits: summary.failedExits };
    conditions.push(summary.condition);
  }
  return {
    observedGeneration: gateway.metadata.generation ?? 0,
    replicas,
    readyReplicas: ready,
    ready: `${ready}/${replicas}`,
    endpoint: `${gateway.spec.advertisedHost}:${gateway.spec.port}`,
    ...exits,
    conditions: setConditions(gateway.status?.conditions, conditions, gateway.metadata.generation, now),
  };
}

/**
 * The Events a status change records, in order. Ready True is Normal; not ready at creation is
 * expected, so losing readiness (a Ready condition existed before) is the notable transition,
 * and PlanConflict is always told. A Deployment failure, a failed apply and an exit's source
 * address going missing are Warnings; the addresses being back after that is Normal.
 */
export function statusEvents(
  before: ProxyGatewayStatus['conditions'],
  after: NonNullable<ProxyGatewayStatus['conditions']>,
): StatusEvent[] {
  const events: StatusEvent[] = [];
  for (const c of transitions(before, after)) {
    if (c.type === 'Ready' && c.status === 'True')
      events.push({ type: 'Normal', reason: 'Ready', message: c.message });
    if (c.type === 'Ready' && c.reason === 'PlanConflict') {
      events.push({ type: 'Warning', reason: 'PlanConflict', message: c.message });
    } else if (c.type === 'Ready' && c.status === 'False' && findCondition(before, 'Ready')) {
      events.push({ type: 'Warning', reason: 'NotReady', message: c.message });
    }
    if ((c.type === 'Degraded' && c.status === 'True') || (c.type === 'Applied' && c.status === 'False'))
      events.push({ type: 'Warning', reason: c.reason, message: c.message });
    if (c.type === 'ExitAddressMissing' && c.status === 'True')
      events.push({ type: 'Warning', reason: 'ExitAddressMissing', message: c.message });
    if (
      c.type === 'ExitAddressMissing' &&
      c.status === 'False' &&
      findCondition(before, 'ExitAddressMissing')?.status === 'True'
    )
      events.push({ type: 'Normal', reason: 'ExitAddressesBack', message: c.message });
  }
  return events;
}
