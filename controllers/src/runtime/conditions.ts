// Status conditions (metav1.Condition): lastTransitionTime changes only when status changes.
import { rfc3339 } from './status.ts';
export type ConditionStatus = 'True' | 'False' | 'Unknown';

export interface Condition {
  type: string;
  status: ConditionStatus;
  reason: string;
  message: string;
  observedGeneration?: number;
  lastTransitionTime: string;
}

export type ConditionInput = Omit<Condition, 'lastTransitionTime' | 'observedGeneration'>;

/** The new condition list: `updates` replace same-typed ones, keeping their transition time when status is unchanged. */
export function setConditions(
  existing: readonly Condition[] | undefined,
  updates: readonly ConditionInput[],
  generation: number | undefined,
  now: Date = new Date(),
): Condition[] {
  const out = new Map((existing ?? []).map((c) => [c.type, c]));
  for (const u of updates) {
    const prev = out.get(u.type);
    out.set(u.type, {
      ...u,
      observedGeneration: generation,
      lastTransitionTime: prev && prev.status === u.status ? prev.lastTransitionTime : rfc3339(now),
    });
  }
  return [...out.values()];
}

export function findCondition(
  conditions: readonly Condition[] | undefined,
  type: string,
): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

/** Condition types whose status differs between two lists (for Events on transitions). */
export function transitions(
  before: readonly Condition[] | undefined,
  after: readonly Condition[],
): Condition[] {
  return after.filter((c) => findCondition(before, c.type)?.status !== c.status);
}
