// Test harness: an Operator in this process against a test control plane (test/kube/env.ts),
// running as the least-privileged operator user unless told otherwise.
import { createLogger } from '#common/logger.ts';
import { createRegistry } from '#common/metrics.ts';
import type { Pool } from '#common/db/pool.ts';
import { Operator, LEASE_NAME, type OperatorOptions } from '../../controllers/src/operator.ts';
import {
  createKubeClient,
  loadKubeConfig,
  type KubeClient,
  type KubeObject,
} from '../../controllers/src/runtime/kube.ts';
import { restClientMetrics } from '../../controllers/src/runtime/metrics.ts';
import { RESOURCES } from '../../controllers/src/runtime/resources.ts';
import { RELEASE_NAMESPACE } from './env.ts';

export const TEST_GATEWAY_OPTIONS = {
  image: 'proxyfleet:test',
  imagePullPolicy: 'IfNotPresent',
  databaseSecret: { name: 'proxyfleet-database', key: 'url' },
  logLevel: 'info',
} as const;

export function kubeClientFor(kubeconfigFile: string): KubeClient {
  return createKubeClient(loadKubeConfig(kubeconfigFile));
}

export interface TestOperatorOptions {
  kubeconfig: string;
  pool: Pool;
  leaseNamespace?: string;
  identity?: string;
  /** Leader-election timings (default: lease 3 s, renew deadline 2 s, retry 500 ms). */
  lease?: { durationMs: number; renewDeadlineMs: number; retryPeriodMs: number };
  overrides?: Partial<OperatorOptions>;
}

export function createTestOperator(o: TestOperatorOptions): Operator {
  const registry = createRegistry('controller', false);
  return new Operator({
    client: createKubeClient(loadKubeConfig(o.kubeconfig), { onResponse: restClientMetrics(registry) }),
    pool: o.pool,
    logger: createLogger(
      'controller',
      process.env.PROXYFLEET_TEST_LOG_LEVEL === 'debug' ? 'debug' : 'silent',
    ),
    registry,
    gateway: { ...TEST_GATEWAY_OPTIONS },
    operatorNamespace: RELEASE_NAMESPACE,
    resyncMs: 60_000,
    informer: { minBackoffMs: 100, maxBackoffMs: 2_000 },
    leaderElection: o.leaseNamespace
      ? {
          namespace: o.leaseNamespace,
          name: LEASE_NAME,
          identity: o.identity ?? 'test',
          leaseDurationMs: o.lease?.durationMs ?? 3_000,
          renewDeadlineMs: o.lease?.renewDeadlineMs ?? 2_000,
          retryPeriodMs: o.lease?.retryPeriodMs ?? 500,
        }
      : false,
    ...o.overrides,
  });
}

/** Who holds the operator's Lease (undefined when nobody: a released Lease has no holder). */
export async function leaseHolder(client: KubeClient, name = LEASE_NAME): Promise<string | undefined> {
  const lease = await client.get<KubeObject & { spec?: { holderIdentity?: string | null } }>(
    RESOURCES.lease,
    RELEASE_NAMESPACE,
    name,
  );
  return lease?.spec?.holderIdentity ?? undefined;
}
