// ProxyGateway reconciler: applies the desired objects with server-side apply (one field
// manager), removes the HPA when scaling is fixed, publishes the plan's public endpoint in
// gateway_endpoints (so generated proxy strings point at this gateway), and reports status from
// the Deployment. A finalizer removes the endpoint row again on deletion; the owned objects go
// with the CR through their owner references.
import type { Pool } from '../../../common/src/db/pool.ts';
import { upsertGatewayEndpoint } from '../../../common/src/gateway-endpoints.ts';
import type { Logger } from '../../../common/src/logger.ts';
import { findCondition, setConditions, transitions, type ConditionInput } from '../runtime/conditions.ts';
import type { ReconcileResult } from '../runtime/controller.ts';
import type { EventRecorder } from '../runtime/events.ts';
import { addFinalizer, hasFinalizer, removeFinalizer } from '../runtime/finalizers.ts';
import type { Informer } from '../runtime/informer.ts';
import type { KubeClient, KubeObject } from '../runtime/kube.ts';
import { RESOURCES } from '../runtime/resources.ts';
import { applyStatus } from '../runtime/status.ts';
import { FIELD_MANAGER, PROXY_GATEWAY } from '../crds/resources.ts';
import type { ProxyGateway, ProxyGatewayStatus } from '../crds/types.generated.ts';
import { childName, desiredObjects, type GatewayOptions } from './desired.ts';

export const PGW_FINALIZER = 'proxyfleet.io/gateway-endpoint';
/** Takes spec.replicas over from our field manager when an HPA starts owning it. */
export const HANDOFF_FIELD_MANAGER = 'proxyfleet-handoff';

interface Deployment extends KubeObject {
  metadata: KubeObject['metadata'] & {
    managedFields?: Array<{ manager?: string; operation?: string; fieldsV1?: Record<string, unknown> }>;
  };
  spec?: { replicas?: number };
  status?: {
    observedGeneration?: number;
    replicas?: number;
    readyReplicas?: number;
    updatedReplicas?: number;
    conditions?: Array<{ type: string; status: string; reason?: string; message?: string }>;
  };
}

export interface ProxyGatewayReconcilerDeps {
  client: KubeClient;
  pool: Pool;
  gateways: Informer<ProxyGateway>;
  deployments: Informer<KubeObject>;
  recorder: EventRecorder;
  logger: Logger;
  options: GatewayOptions;
}

const endpointSource = (pgw: ProxyGateway) => `ProxyGateway/${pgw.metadata.namespace}/${pgw.metadata.name}`;

export function proxyGatewayReconciler(
  deps: ProxyGatewayReconcilerDeps,
): (key: string) => Promise<ReconcileResult | void> {
  const { client, pool, recorder } = deps;

  return async (key) => {
    const cached = deps.gateways.get(key);
    if (!cached) return;
    if (cached.metadata.deletionTimestamp) {
      if (hasFinalizer(cached, PGW_FINALIZER)) {
        await pool.query('DELETE FROM gateway_endpoints WHERE plan = $1 AND source = $2', [
          cached.spec.plan,
          endpointSource(cached),
        ]);
        await removeFinalizer(client, PROXY_GATEWAY, cached, PGW_FINALIZER);
      }
      return;
    }
    const pgw = await addFinalizer(client, PROXY_GATEWAY, cached, PGW_FINALIZER);

    const desired = desiredObjects(pgw, deps.options);
    try {
      for (const { resource, object } of desired.objects) {
        if (resource === RESOURCES.deployment) await handOffReplicas(pgw, object);
        await client.apply(resource, object, { fieldManager: FIELD_MANAGER, force: true });
      }
      for (const { resource, name } of desired.absent) {
        await client.delete(resource, pgw.metadata.namespace, name);
      }
      await upsertGatewayEndpoint(
        pool,
        { plan: pgw.spec.plan, host: pgw.spec.advertisedHost, port: pgw.spec.port },
        endpointSource(pgw),
      );
    } catch (err) {
      await writeStatus(pgw, undefined, {
        type: 'Degraded',
        status: 'True',
        reason: 'ApplyFailed',
        message: (err as Error).message.slice(0, 512),
      });
      throw err;
    }
    const deployment = deps.deployments.get(`${pgw.metadata.namespace}/${childName(pgw)}`);
    await writeStatus(pgw, deployment);
  };

  /**
   * Fixed -> autoscaled: our apply no longer sets spec.replicas. Were we still its only owner, the
   * apply would remove the field and the apiserver would default it to 1 until the HPA scales
   * back up. As the Kubernetes docs describe for migrating to an HPA, first give the current
   * value to another field manager, so dropping it from our apply leaves it in place.
   */
  async function handOffReplicas(pgw: ProxyGateway, desired: KubeObject): Promise<void> {
    if ((desired as Deployment).spec?.replicas !== undefined) return;
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion -- a false positive: tsc needs it (KubeObject has no spec)
    const live = deps.deployments.get(`${pgw.metadata.namespace}/${desired.metadata.name}`) as
      Deployment | undefined;
    const replicas = live?.spec?.replicas;
    if (replicas === undefined) return;
    const ownedByUs = live!.metadata.managedFields?.some(
      (f) =>
        f.manager === FIELD_MANAGER &&
        f.operation === 'Apply' &&
        (f.fieldsV1?.['f:spec'] as Record<string, unknown> | undefined)?.['f:replicas'] !== undefined,
    );
    if (!ownedByUs) return;
    await client.apply(
      RESOURCES.deployment,
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: desired.metadata.name, namespace: desired.metadata.namespace },
        spec: { replicas },
      } as KubeObject,
      { fieldManager: HANDOFF_FIELD_MANAGER, force: true },
    );
    deps.logger.info(
      { proxyGateway: `${pgw.metadata.namespace}/${pgw.metadata.name}`, replicas },
      'spec.replicas handed off before autoscaling takes over',
    );
  }

  async function writeStatus(
    pgw: ProxyGateway,
    deployment: Deployment | undefined,
    failure?: ConditionInput,
  ): Promise<void> {
    const ds = deployment?.status ?? {};
    const replicas = deployment?.spec?.replicas ?? ds.replicas ?? 0;
    const ready = ds.readyReplicas ?? 0;
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
    const updates: ConditionInput[] = [
      ready > 0
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
      failure ??
        (failed
          ? {
              type: 'Degraded',
              status: 'True',
              reason: failed.reason ?? failed.type,
              message: failed.message ?? '',
            }
          : { type: 'Degraded', status: 'False', reason: 'AsExpected', message: 'objects applied' }),
    ];
    const conditions = setConditions(pgw.status?.conditions, updates, pgw.metadata.generation);
    const status: ProxyGatewayStatus = {
      observedGeneration: pgw.metadata.generation ?? 0,
      replicas,
      readyReplicas: ready,
      ready: `${ready}/${replicas}`,
      endpoint: `${pgw.spec.advertisedHost}:${pgw.spec.port}`,
      conditions,
    };
    await applyStatus(client, PROXY_GATEWAY, pgw, status, FIELD_MANAGER);
    for (const c of transitions(pgw.status?.conditions, conditions)) {
      if (c.type === 'Ready' && c.status === 'True') await recorder.record(pgw, 'Normal', 'Ready', c.message);
      // Not ready at creation is expected; losing readiness is the notable transition.
      if (c.type === 'Ready' && c.status === 'False' && findCondition(pgw.status?.conditions, 'Ready')) {
        await recorder.record(pgw, 'Warning', 'NotReady', c.message);
      }
      if (c.type === 'Degraded' && c.status === 'True')
        await recorder.record(pgw, 'Warning', c.reason, c.message);
    }
  }
}
