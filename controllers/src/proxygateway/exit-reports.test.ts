// Which heartbeat rows are a ProxyGateway's pods': the names Kubernetes gives a Deployment's pods.
import { describe, expect, test } from '@jest/globals';
import { isGatewayPod, podPrefix } from './exit-reports.ts';

/** A Deployment name of `n` characters (the CR's name is at most 50: childName at most 58). */
const named = (n: number) => `${'g'.repeat(n - 8)}-gateway`;

const cases: Array<[name: string, pod: string, deployment: string, ours: boolean]> = [
  ["a pod of the Deployment's ReplicaSet", 'basic-gateway-7d9c5b8f4-x2kqz', 'basic-gateway', true],
  [
    'a pod of another ReplicaSet (a rollout under way)',
    'basic-gateway-59f6b7c8d-bbw4m',
    'basic-gateway',
    true,
  ],
  [
    "another ProxyGateway's pod whose name starts with ours",
    'basic-gateway-2-gateway-7d9c5b8f4-x2kqz',
    'basic-gateway',
    false,
  ],
  [
    'not a generated suffix (vowels are never generated)',
    'basic-gateway-7d9c5b8f4-abcde',
    'basic-gateway',
    false,
  ],
  ['no hash part', 'basic-gateway-x2kqz', 'basic-gateway', false],
  ['another Deployment', 'mobile-gateway-7d9c5b8f4-x2kqz', 'basic-gateway', false],
  ['a gateway outside Kubernetes (its host name)', 'gw-host-1', 'basic-gateway', false],
  // Kubernetes cuts `<replicaset>-` to 58 characters before the 5 random ones.
  ['a long name: the hash cut short', `${named(50)}-7d9c5b2x2kqz`, named(50), true],
  ['a 57-character Deployment: no room for the hash', `${named(57)}-x2kqz`, named(57), true],
  ['a 58-character Deployment: not even its dash', `${named(58)}x2kqz`, named(58), true],
  ['a long name followed by more than a hash', `${named(50)}-bc-dfg-x2kqz`, named(50), false],
];

describe('the pods of a ProxyGateway by name', () => {
  test.each(cases)('%s', (_name, pod, deployment, ours) => {
    expect(pod.length).toBeLessThanOrEqual(63);
    expect(isGatewayPod(pod, deployment)).toBe(ours);
    // The query's prefix never leaves one of ours out.
    if (ours) expect(pod.startsWith(podPrefix(deployment))).toBe(true);
  });
});
