// The ProxyGateway status rules as tables: what was observed in, conditions and columns out.
import { describe, expect, test } from '@jest/globals';
import type { Condition } from '../runtime/conditions.ts';
import type { ProxyGateway, ProxyGatewayStatus } from '../crds/types.generated.ts';
import { exitTarget, summarizeExits, type PodExits } from './exit-status.ts';
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
        const [type, status, reason] = c.split(' ') as [string, 'True' | 'False' | 'Unknown', string];
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

// The exits as the pods' heartbeats report them (exit-status.ts, docs/adr/0117).
const EXITS = [
  { name: 'a', country: 'us', sourceAddress: '10.0.0.5' },
  { name: 'b', country: 'us', sourceAddress: '10.0.0.6' },
  { name: 'up', country: 'de', upstream: { url: 'http://user:secret@10.1.0.7:3128' } },
  { name: 'any', country: '*' },
] as ProxyGateway['spec']['exits'];
const ALL_OK = [
  { n: 'a', s: 'ok' },
  { n: 'b', s: 'ok' },
  { n: 'up', s: 'ok' },
  { n: 'any', s: 'ok' },
];
/** A pod reporting ALL_OK but for the states given. */
const pod = (name: string, states: Record<string, string> = {}): PodExits => ({
  pod: name,
  exits: ALL_OK.map((r) => ({ ...r, s: states[r.n] ?? r.s })),
});

/** One case a line: the pods' rows, then exitsReady, failedExits, the condition, and "ok/failing/missing" per exit. */
const exitCases: Array<
  [name: string, pods: PodExits[], ready: string, failed: number, condition: string, counts: string]
> = [
  ['no pod beats', [], '0/4', 0, 'Unknown NoReports', 'a 0/0/0, b 0/0/0, up 0/0/0, any 0/0/0'],
  [
    'only pods of an earlier release (no exits on their heartbeat)',
    [{ pod: 'p1', exits: null }],
    '0/4',
    0,
    'Unknown NoReports',
    'a 0/0/0, b 0/0/0, up 0/0/0, any 0/0/0',
  ],
  [
    'two pods, every exit ok',
    [pod('p1'), pod('p2')],
    '4/4',
    0,
    'False AddressesPresent',
    'a 2/0/0, b 2/0/0, up 2/0/0, any 2/0/0',
  ],
  [
    'an address missing on one pod: the exit still works on the other',
    [pod('p1', { b: 'missing' }), pod('p2')],
    '4/4',
    1,
    'True AddressMissing',
    'a 2/0/0, b 1/0/1, up 2/0/0, any 2/0/0',
  ],
  [
    'an address missing on every pod',
    [pod('p1', { b: 'missing' }), pod('p2', { b: 'missing' })],
    '3/4',
    1,
    'True AddressMissing',
    'a 2/0/0, b 0/0/2, up 2/0/0, any 2/0/0',
  ],
  [
    'an upstream failing on one pod: failed, but no address is missing',
    [pod('p1', { up: 'failing' }), pod('p2')],
    '4/4',
    1,
    'False AddressesPresent',
    'a 2/0/0, b 2/0/0, up 1/1/0, any 2/0/0',
  ],
  [
    'a pod of an older spec does not report an exit: not counted there; unreadable entries skipped',
    [pod('p1'), { pod: 'p2', exits: [{ n: 'a', s: 'ok' }, { n: 'b', s: 'weird' }, 'x', null] }],
    '4/4',
    0,
    'False AddressesPresent',
    'a 2/0/0, b 1/0/0, up 1/0/0, any 1/0/0',
  ],
];

describe('the exits as the pods report them', () => {
  test.each(exitCases)('%s', (_name, pods, ready, failed, condition, counts) => {
    const s = summarizeExits(EXITS, pods);
    expect([s.exitsReady, s.failedExits, `${s.condition.status} ${s.condition.reason}`]).toEqual([
      ready,
      failed,
      condition,
    ]);
    expect(s.exits.map((e) => `${e.name} ${e.pods.ok}/${e.pods.failing}/${e.pods.missing}`).join(', ')).toBe(
      counts,
    );
  });

  test('targets: the source address, the upstream host:port without its credentials, or the default route', () => {
    expect(summarizeExits(EXITS, []).exits.map((e) => e.target)).toEqual([
      '10.0.0.5',
      '10.0.0.6',
      '10.1.0.7:3128',
      'default route',
    ]);
    const up = (url: string) => exitTarget({ name: 'x', country: 'us', upstream: { url } });
    expect([up('http://proxy.example:8080'), up('http://[fd00::7]'), up('https://u:p@tls.example')]).toEqual([
      'proxy.example:8080',
      '[fd00::7]:80',
      'tls.example:443',
    ]);
    expect(JSON.stringify(summarizeExits(EXITS, [pod('p1')]))).not.toContain('secret');
  });

  test('the condition names the missing addresses, their exits and on how many pods', () => {
    const s = summarizeExits(EXITS, [
      pod('p1', { a: 'missing', b: 'missing' }),
      pod('p2', { b: 'missing' }),
      pod('p3'),
    ]);
    expect(s.condition.message).toBe(
      'source address on no interface of the pod, the exit skipped there: 10.0.0.5 (exit a) on 1/3 pods, 10.0.0.6 (exit b) on 2/3 pods',
    );
  });

  test('last success and failure: the latest of the pods, moved only in steps of a minute, the error with its failure', () => {
    const at = (s: number) => new Date(s * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
    const T = 1_767_225_600; // 2026-01-01T00:00:00Z
    const rows = (ls: number, lf: number, e: string): PodExits[] => [
      { pod: 'p1', exits: [{ n: 'up', s: 'ok', ls, lf: lf - 100, e: 'ECONNREFUSED' }] },
      { pod: 'p2', exits: [{ n: 'up', s: 'failing', ls: ls - 5, lf, cf: 2, e }] },
    ];
    const first = summarizeExits(EXITS, rows(T, T - 10, 'upstream_407')).exits[2]!;
    expect(first).toEqual({
      name: 'up',
      target: '10.1.0.7:3128',
      pods: { ok: 1, failing: 1, missing: 0 },
      lastSuccess: at(T),
      lastFailure: at(T - 10),
      lastError: 'upstream_407',
    });
    // 30 s later: nothing moves (no status write); 61 s later: both move, the error with its failure.
    expect(summarizeExits(EXITS, rows(T + 30, T + 20, 'ETIMEDOUT'), [first]).exits[2]).toEqual(first);
    const moved = summarizeExits(EXITS, rows(T + 61, T + 55, 'ETIMEDOUT'), [first]).exits[2]!;
    expect(moved).toMatchObject({ lastSuccess: at(T + 61), lastFailure: at(T + 55), lastError: 'ETIMEDOUT' });
    // The pods with the latest times gone (replaced, restarted): the times shown do not go back.
    const later = [{ pod: 'p3', exits: [{ n: 'up', s: 'ok', ls: T + 40 }] }];
    expect(summarizeExits(EXITS, later, [moved]).exits[2]).toEqual({
      ...moved,
      pods: { ok: 1, failing: 0, missing: 0 },
    });
  });
});

describe('status with the exits', () => {
  const withExits = (conditions?: Condition[], status: Partial<ProxyGatewayStatus> = {}) => {
    const g = gateway(3, conditions);
    return { ...g, spec: { ...g.spec, exits: EXITS }, status: { ...g.status, ...status } };
  };

  test('the columns, the exits and the condition; kept as they are when the heartbeats were not read', () => {
    const s = gatewayStatus(
      { gateway: withExits(), deployment: allUp, applied, exits: [pod('p1', { b: 'missing' })] },
      T0,
    );
    expect(s).toMatchObject({ exitsReady: '3/4', failedExits: 1 });
    expect(s.exits).toHaveLength(4);
    expect(s.conditions!.map((c) => `${c.type} ${c.status}`)).toContain('ExitAddressMissing True');
    const failedApply = gatewayStatus(
      { gateway: withExits(s.conditions, s), deployment: allUp, applied: { kind: 'failed', error: 'x' } },
      T1,
    );
    expect(failedApply).toMatchObject({ exits: s.exits, exitsReady: '3/4', failedExits: 1 });
    expect(failedApply.conditions!.find((c) => c.type === 'ExitAddressMissing')).toEqual(
      s.conditions!.find((c) => c.type === 'ExitAddressMissing'),
    );
  });

  test.each([
    [
      'an address goes missing',
      'ExitAddressMissing False AddressesPresent',
      'ExitAddressMissing True AddressMissing',
      ['Warning ExitAddressMissing'],
    ],
    [
      'found missing at the first report',
      'ExitAddressMissing Unknown NoReports',
      'ExitAddressMissing True AddressMissing',
      ['Warning ExitAddressMissing'],
    ],
    [
      'the addresses are back',
      'ExitAddressMissing True AddressMissing',
      'ExitAddressMissing False AddressesPresent',
      ['Normal ExitAddressesBack'],
    ],
    [
      'the first report finds every address',
      'ExitAddressMissing Unknown NoReports',
      'ExitAddressMissing False AddressesPresent',
      [],
    ],
  ])('events: %s', (_name, before, after, events) => {
    const got = statusEvents(conds(before), conds(after)!);
    expect(got.map((e) => `${e.type} ${e.reason}`)).toEqual(events);
  });
});
