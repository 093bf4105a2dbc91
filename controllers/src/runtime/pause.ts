// Pausing reconciliation for a manual fix (Strimzi's strimzi.io/pause-reconciliation): the
// annotation `proxyfleet.io/reconcile: paused` on a primary object makes its reconciler leave
// everything as it is. What pausing writes is status only: a Paused condition (True while paused,
// False with reason Resumed once the annotation is gone) and an Event on each transition, so
// `kubectl get` and `kubectl describe` say why nothing happens. Deletion is never paused: a
// paused object can still be deleted and its finalizer still cleans up (docs/adr/0104).
import { findCondition, setConditions, type Condition, type ConditionInput } from './conditions.ts';
import type { EventRecorder } from './events.ts';
import type { KubeClient, KubeObject, Resource } from './kube.ts';
import { applyStatus } from './status.ts';

export const RECONCILE_ANNOTATION = 'proxyfleet.io/reconcile';
export const PAUSED = 'paused';

interface WithConditions extends KubeObject {
  status?: { conditions?: Condition[] } & Record<string, unknown>;
}

/** Whether the object asks not to be reconciled (the annotation's value is exactly `paused`). */
export const isPaused = (o: KubeObject) => o.metadata.annotations?.[RECONCILE_ANNOTATION] === PAUSED;

const pausedCondition: ConditionInput = {
  type: 'Paused',
  status: 'True',
  reason: 'ReconcilePaused',
  message: `annotation ${RECONCILE_ANNOTATION}: ${PAUSED} is set: nothing is applied or deleted until it is removed`,
};

/** The Paused condition to write when reconciling again: False/Resumed once it was ever set, else none. */
export function resumedConditions(existing: readonly Condition[] | undefined): ConditionInput[] {
  if (!findCondition(existing, 'Paused')) return [];
  return [
    {
      type: 'Paused',
      status: 'False',
      reason: 'Resumed',
      message: `annotation ${RECONCILE_ANNOTATION} is not ${PAUSED}: reconciling`,
    },
  ];
}

/**
 * Called by a reconciler instead of its work while the object is paused: writes Paused=True into
 * the status it already has (every other field kept as it is, so the field manager keeps owning
 * them) and records the Event, once per pause.
 */
export async function reportPaused(
  client: KubeClient,
  resource: Resource,
  object: WithConditions,
  recorder: EventRecorder,
  fieldManager: string,
): Promise<void> {
  if (findCondition(object.status?.conditions, 'Paused')?.status === 'True') return;
  const conditions = setConditions(object.status?.conditions, [pausedCondition], object.metadata.generation);
  await applyStatus(client, resource, object, { ...object.status, conditions }, fieldManager);
  await recorder.record(object, 'Normal', 'ReconcilePaused', pausedCondition.message);
}

/** The Event when a paused object is reconciled again (the reconciler writes the condition with its status). */
export async function recordResumed(recorder: EventRecorder, object: WithConditions): Promise<void> {
  if (findCondition(object.status?.conditions, 'Paused')?.status !== 'True') return;
  await recorder.record(
    object,
    'Normal',
    'ReconcileResumed',
    `annotation ${RECONCILE_ANNOTATION} removed: reconciling`,
  );
}
