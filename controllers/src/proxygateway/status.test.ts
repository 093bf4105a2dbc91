// The ProxyGateway status rules as tables: what was observed in, conditions and columns out.
import { describe, expect, test } from '@jest/globals';
import type { Condition } from '../runtime/conditions.ts';
import type { ProxyGateway } from '../crds/types.generated.ts';
import {
  gatewayConditions,
  gatewayStatus,
  statusEvents,
  type ApplyOutcome,
  type ObservedDeployment,
  type StatusInputs,
} from './status.ts';

const T0 = new Date('2026-01-01T00:00:00Z');
const T1 = new Date('2026-01-01T00:05:00Z');

const gateway = (generation = 3, conditions?: Condition[]): StatusInputs['gateway'] => ({
  metadata: { name: 'basic', namespace: 'gateways', generation },
  // What status reads of the spec (exits, replicas and the rest do not enter it).
  spec: { plan: 'basic', port: 12321, advertisedHost: 'basic.proxy.example.com' } as ProxyGateway['spec'],
  ...(conditions ? { status: { conditions } } : {}),
});

/** A Deployment at generation 5 observed by its controller, with `spec.replicas` desired pods. */
const deployment = (
  replicas: number | undefined,
  status: NonNullable<ObservedDeployment['status']>,
  generation = 5,
): ObservedDeployment => ({
  metadata: { generation },
  ...(replicas === undefined ? {} : { spec: { replicas } }),
  status: { observedGeneration: generation, ...status },
});

const applied: ApplyOutcome = { kind: 'applied' };
const allUp = deployment(2, { replicas: 2, readyReplicas: 2, updatedReplicas: 2 });

/**
 * One case a line: what was observed, then "status reason" of Ready, Progressing, Degraded and
 * Applied (always in that order), then the Ready column.
 */
const cases: Array<[name: string, inputs: Omit<StatusInputs, 'gateway'>, conditions: string, ready: string]> =
  [
    [
      'no Deployment yet',
      { deployment: undefined, applied },
      'False NoReadyPods, True RollingOut, False AsExpected, True AsExpected',
      '0/0',
    ],
    [
      'every pod updated and ready',
      { deployment: deployment(3, { replicas: 3, readyReplicas: 3, updatedReplicas: 3 }), applied },
      'True PodsReady, False RolledOut, False AsExpected, True AsExpected',
      '3/3',
    ],
    [
      'one pod ready of three: Ready, still rolling out',
      { deployment: deployment(3, { replicas: 3, readyReplicas: 1, updatedReplicas: 3 }), applied },
      'True PodsReady, True RollingOut, False AsExpected, True AsExpected',
      '1/3',
    ],
    [
      "the Deployment's controller has not seen its new generation: still rolling out",
      { deployment: { ...allUp, metadata: { generation: 6 } }, applied },
      'True PodsReady, True RollingOut, False AsExpected, True AsExpected',
      '2/2',
    ],
    [
      'no spec.replicas (autoscaled, before the hand-off): desired pods from status.replicas',
      { deployment: deployment(undefined, { replicas: 4, readyReplicas: 4, updatedReplicas: 4 }), applied },
      'True PodsReady, False RolledOut, False AsExpected, True AsExpected',
      '4/4',
    ],
    [
      'a ReplicaFailure condition: Degraded with its reason',
      {
        deployment: deployment(2, {
          replicas: 0,
          conditions: [{ type: 'ReplicaFailure', status: 'True', reason: 'FailedCreate', message: 'quota' }],
        }),
        applied,
      },
      'False NoReadyPods, True RollingOut, True FailedCreate, True AsExpected',
      '0/2',
    ],
    [
      'the progress deadline passed: Degraded',
      {
        deployment: deployment(2, {
          replicas: 2,
          readyReplicas: 1,
          updatedReplicas: 1,
          conditions: [
            { type: 'Progressing', status: 'False', reason: 'ProgressDeadlineExceeded', message: 'stuck' },
          ],
        }),
        applied,
      },
      'True PodsReady, True RollingOut, True ProgressDeadlineExceeded, True AsExpected',
      '1/2',
    ],
    [
      "another gateway owns the plan's endpoint: PlanConflict although pods are ready",
      { deployment: allUp, applied, planOwner: 'ProxyGateway/other/basic' },
      'False PlanConflict, False RolledOut, False AsExpected, True AsExpected',
      '2/2',
    ],
    [
      'an object we did not create: Applied False, the running pods still described',
      { deployment: allUp, applied: { kind: 'notOwned', objects: ['Service basic-gateway'] } },
      'True PodsReady, False RolledOut, False AsExpected, False ObjectNotOwned',
      '2/2',
    ],
    [
      'the apply failed: Applied False, the running pods still described',
      { deployment: allUp, applied: { kind: 'failed', error: 'admission webhook refused' } },
      'True PodsReady, False RolledOut, False AsExpected, False ApplyFailed',
      '2/2',
    ],
  ];

describe('conditions from the observed Deployment, the apply and the endpoint', () => {
  test.each(cases)('%s', (_name, inputs, conditions, ready) => {
    const all = { gateway: gateway(), ...inputs };
    const got = gatewayConditions(all);
    expect(got.map((c) => c.type)).toEqual(['Ready', 'Progressing', 'Degraded', 'Applied']);
    expect(got.map((c) => `${c.status} ${c.reason}`).join(', ')).toBe(conditions);
    const status = gatewayStatus(all, T0);
    expect(status).toMatchObject({ observedGeneration: 3, ready, endpoint: 'basic.proxy.example.com:12321' });
    expect(status.ready).toBe(`${status.readyReplicas}/${status.replicas}`);
  });

  test('the messages a person reads in kubectl describe', () => {
    const d = deployment(3, { replicas: 3, readyReplicas: 1, updatedReplicas: 2 });
    const byType = (inputs: Omit<StatusInputs, 'gateway'>) =>
      Object.fromEntries(
        gatewayConditions({ gateway: gateway(), ...inputs }).map((c) => [c.type, c.message]),
      );
    expect(byType({ deployment: d, applied })).toEqual({
      Ready: '1/3 gateway pods ready',
      Progressing: '2/3 pods updated, 1 ready',
      Degraded: 'the Deployment reports no failure',
      Applied: 'every object applied',
    });
    expect(byType({ deployment: d, applied, planOwner: 'ProxyGateway/x/y' }).Ready).toBe(
      "plan basic's public endpoint belongs to ProxyGateway/x/y; this gateway (1/3 pods ready) is not advertised",
    );
    expect(
      byType({ deployment: d, applied: { kind: 'notOwned', objects: ['Deployment a', 'Service a'] } })
        .Applied,
    ).toBe('not created by this ProxyGateway, left untouched: Deployment a, Service a; delete or rename it');
    expect(
      byType({ deployment: d, applied: { kind: 'failed', error: 'x'.repeat(600) } }).Applied,
    ).toHaveLength(512);
  });
});

describe('merging into the conditions the CR already has', () => {
  test('a transition time moves only when the status changes; the generation is the CR’s', () => {
    const d = allUp;
    const first = gatewayStatus({ gateway: gateway(3), deployment: d, applied }, T0);
    const again = gatewayStatus({ gateway: gateway(4, first.conditions), deployment: d, applied }, T1);
    expect(again.conditions!.every((c) => c.lastTransitionTime === '2026-01-01T00:00:00Z')).toBe(true);
    expect(again.conditions!.every((c) => c.observedGeneration === 4)).toBe(true);
    const lost = gatewayStatus(
      { gateway: gateway(4, first.conditions), deployment: deployment(2, { replicas: 2 }), applied },
      T1,
    );
    expect(lost.conditions!.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      lastTransitionTime: '2026-01-01T00:05:00Z',
    });
  });
});

/** Conditions written "Type Status Reason; ..." (the message is "Type Reason"); undefined for none. */
const conds = (text: string): Condition[] | undefined =>
  text === ''
    ? undefined
    : text.split('; ').map((c) => {
        const [type, status, reason] = c.split(' ') as [string, 'True' | 'False', string];
        return {
          type,
          status,
          reason,
          message: `${type} ${reason}`,
          lastTransitionTime: '2026-01-01T00:00:00Z',
        };
      });

/** One case a line: conditions before, after, and the events recorded ("Type Reason"). */
const eventCases: Array<[name: string, before: string, after: string, events: string[]]> = [
  ['created, not ready yet: nothing notable', '', 'Ready False NoReadyPods; Degraded False AsExpected', []],
  ['becomes ready', 'Ready False NoReadyPods', 'Ready True PodsReady', ['Normal Ready']],
  ['loses readiness', 'Ready True PodsReady', 'Ready False NoReadyPods', ['Warning NotReady']],
  ['a plan conflict at creation is told at once', '', 'Ready False PlanConflict', ['Warning PlanConflict']],
  [
    'a plan conflict after being ready',
    'Ready True PodsReady',
    'Ready False PlanConflict',
    ['Warning PlanConflict'],
  ],
  [
    'degraded and an object not owned, with their reasons',
    'Degraded False AsExpected; Applied True AsExpected',
    'Degraded True FailedCreate; Applied False ObjectNotOwned',
    ['Warning FailedCreate', 'Warning ObjectNotOwned'],
  ],
  ['no status change: no event', 'Ready True PodsReady', 'Ready True PodsReady', []],
  [
    'recovering from degraded or a failed apply is not a warning',
    'Degraded True FailedCreate; Applied False ApplyFailed',
    'Degraded False AsExpected; Applied True AsExpected',
    [],
  ],
];

describe('the Events a change of status records', () => {
  test.each(eventCases)('%s', (_name, before, after, events) => {
    const got = statusEvents(conds(before), conds(after)!);
    expect(got.map((e) => `${e.type} ${e.reason}`)).toEqual(events);
    for (const e of got) expect(conds(after)!.map((c) => c.message)).toContain(e.message);
  });

  test('a message change alone records nothing', () => {
    const after = conds('Ready True PodsReady')!.map((c) => ({ ...c, message: '3/3 gateway pods ready' }));
    expect(statusEvents(conds('Ready True PodsReady'), after)).toEqual([]);
  });
});
