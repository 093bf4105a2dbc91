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
import { createTestDatabase, type TestDatabase } from '../db.ts';
import { jestHooks } from '../hooks.ts';
import { RELEASE_NAMESPACE, startKube, type KubeEnv } from './env.ts';

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

export interface OperatorFixture {
  kube: KubeEnv;
  db: TestDatabase;
  /** A client with the cluster administrator's rights (what the tests apply and read with). */
  admin: KubeClient;
  operator: Operator;
}

/**
 * A Kubernetes API server, a test database and the operator on both, for the tests of a
 * describeKube block: `before` runs once the API server and the database are up and before the
 * operator starts (namespaces, accounts, what the operator must find); `after` runs once the
 * operator has stopped, before the API server and the database go. Read the fields inside tests.
 */
export function useOperator(
  hooks: { before?: (f: OperatorFixture) => Promise<unknown>; after?: () => Promise<unknown> } = {},
): OperatorFixture {
  const fixture = {} as OperatorFixture;
  jestHooks().beforeAll(async () => {
    [fixture.kube, fixture.db] = await Promise.all([startKube(), createTestDatabase()]);
    fixture.admin = kubeClientFor(fixture.kube.adminKubeconfig);
    await hooks.before?.(fixture);
    fixture.operator = createTestOperator({
      kubeconfig: fixture.kube.operatorKubeconfig,
      pool: fixture.db.pool,
    });
    await fixture.operator.start();
  }, 120_000);
  jestHooks().afterAll(async () => {
    await fixture.operator?.stop();
    await hooks.after?.();
    await fixture.kube?.stop();
    await fixture.db?.drop();
  });
  return fixture;
}
