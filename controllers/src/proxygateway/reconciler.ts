// ProxyGateway reconciler: applies the desired objects with server-side apply (one field
// manager), removes the HPA when scaling is fixed and the NetworkPolicy when it is off or the
// pods are hostNetwork, publishes the plan's public endpoint in gateway_endpoints (so generated
// proxy strings point at this gateway), and reports status from the Deployment (the rules, pure:
// status.ts). A finalizer removes the endpoint row again on deletion; the owned objects go with the CR through their owner references. It never adopts,
// overwrites or deletes an object it did not create (no controller owner reference to this
// ProxyGateway), and a plan's endpoint has one owner (endpoint.ts). The annotation
// proxyfleet.io/reconcile: paused stops all of it but deletion (runtime/pause.ts). A hostNetwork
// gateway's replicas are capped at the nodes it may run on, and its host ports are checked against
// the other hostNetwork ProxyGateways' (placement.ts, condition HostNetwork).
//
// Status also shows the exits as the pods' heartbeats report them (docs/adr/0117): while the
// gateway has pods it is requeued every EXITS_REFRESH_MS, and a requeue with nothing changed
// since a clean reconcile only reads the heartbeats (one query) and writes status if it changed.
// Status is written only when it differs from what the CR has.
import { isDeepStrictEqual } from 'node:util';
import type { Pool } from '#common/db/pool.ts';
import type { Logger } from '#common/logger.ts';
import { exitLocations } from '#common/gateway-endpoints.ts';
import type { ReconcileResult, ReconcileTrigger } from '../runtime/controller.ts';
import type { EventRecorder } from '../runtime/events.ts';
import { addFinalizer, hasFinalizer, removeFinalizer } from '../runtime/finalizers.ts';
import type { Informer } from '../runtime/informer.ts';
import type { KubeClient, KubeObject } from '../runtime/kube.ts';
import { RESOURCES } from '../runtime/resources.ts';
import { isPaused, recordResumed, reportPaused, resumedConditions } from '../runtime/pause.ts';
import { applyStatus } from '../runtime/status.ts';
import { setConditions } from '../runtime/conditions.ts';
import { FIELD_MANAGER, PROXY_GATEWAY } from '../crds/resources.ts';
import type { ProxyGateway, ProxyGatewayStatus } from '../crds/types.generated.ts';
import { childName, desiredObjects, type Desired } from './desired.ts';
import type { GatewayOptions } from './pod.ts';
import { claimGatewayEndpoint, releaseGatewayEndpoints, type ClaimResult } from './endpoint.ts';
import { readPodExits } from './exit-reports.ts';
import type { PodExits } from './exit-status.ts';
import { gatewayStatus, statusEvents, type ObservedDeployment, type StatusInputs } from './status.ts';
import {
  assessPlacement,
  HOST_NETWORK_CONDITION,
  placementConditions,
  placementEvents,
  type NodeObject,
  type PlacementView,
} from './placement.ts';

export const PGW_FINALIZER = 'proxyfleet.io/gateway-endpoint';
/** Takes spec.replicas over from our field manager when an HPA starts owning it. */
export const HANDOFF_FIELD_MANAGER = 'proxyfleet-handoff';

interface Deployment extends KubeObject, ObservedDeployment {
  metadata: KubeObject['metadata'] & {
    managedFields?: Array<{ manager?: string; operation?: string; fieldsV1?: Record<string, unknown> }>;
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
  /** What placement compares with (peers.ts): every ProxyGateway the operator sees, and the nodes once listed. */
  placement: { gateways(): ProxyGateway[]; nodes(): NodeObject[] | undefined };
}

const endpointSource = (pgw: ProxyGateway) => `ProxyGateway/${pgw.metadata.namespace}/${pgw.metadata.name}`;

/** A ProxyGateway waiting for its plan's endpoint retries this often, so it takes over within seconds of the owner's deletion. */
export const PLAN_CONFLICT_RETRY_MS = 5_000;
/** Retry while a same-name object we do not own blocks a child (a person must remove it). */
export const NOT_OWNED_RETRY_MS = 30_000;
/** How often the exits' status is refreshed from the heartbeats while the gateway has pods. */
export const EXITS_REFRESH_MS = 10_000;

/** Whether `o` carries a controller owner reference to the object with this uid. */
export const controlledBy = (o: KubeObject, uid: string) =>
  uid !== '' && (o.metadata.ownerReferences ?? []).some((r) => r.controller === true && r.uid === uid);

export function proxyGatewayReconciler(
  deps: ProxyGatewayReconcilerDeps,
): (key: string, trigger?: ReconcileTrigger) => Promise<ReconcileResult | void> {
  const { client, pool, recorder } = deps;
  /** Keys whose last whole reconcile applied everything and owns the endpoint: a requeue only refreshes. */
  const clean = new Set<string>();

  return async (key, trigger) => {
    const cached = deps.gateways.get(key);
    const wasClean = clean.delete(key);
    if (!cached) return;
    if (cached.metadata.deletionTimestamp) {
      if (hasFinalizer(cached, PGW_FINALIZER)) {
        await releaseGatewayEndpoints(pool, endpointSource(cached));
        await removeFinalizer(client, PROXY_GATEWAY, cached, PGW_FINALIZER);
      }
      return;
    }
    // Paused (pause.ts): nothing applied, deleted or published; deletion above still cleans up.
    if (isPaused(cached)) return reportPaused(client, PROXY_GATEWAY, cached, recorder, FIELD_MANAGER);
    if (trigger?.requeued && wasClean) {
      const exits = await podExits(cached);
      await writeStatus({
        gateway: cached,
        deployment: observedDeployment(cached),
        applied: { kind: 'applied' },
        // Pure and cheap: without it the refresh would drop the HostNetwork condition.
        placement: assessPlacement(cached, deps.placement.gateways(), deps.placement.nodes()),
        exits,
      });
      clean.add(key);
      return refresh(cached, exits);
    }
    const pgw = await addFinalizer(client, PROXY_GATEWAY, cached, PGW_FINALIZER);
    const uid = pgw.metadata.uid ?? '';
    const namespace = pgw.metadata.namespace!;

    const placement = assessPlacement(pgw, deps.placement.gateways(), deps.placement.nodes());
    const desired = desiredObjects(pgw, deps.options, placement?.nodes?.length);
    const notOwned: string[] = [];
    let claim: ClaimResult;
    try {
      for (const { resource, object } of desired.objects) {
        // Never adopt: an object of this name that we did not create stays untouched.
        const live = await client.get<Deployment>(resource, namespace, object.metadata.name);
        if (live && !controlledBy(live, uid)) {
          notOwned.push(`${resource.kind} ${object.metadata.name}`);
          continue;
        }
        if (resource === RESOURCES.deployment) await prepareReplicas(pgw, object, live, desired);
        await client.apply(resource, object, { fieldManager: FIELD_MANAGER, force: true });
      }
      for (const { resource, name } of desired.absent) {
        const live = await client.get(resource, namespace, name);
        // Never delete what we do not own; the uid precondition guards against a same-name replacement.
        if (live && controlledBy(live, uid))
          await client.delete(resource, namespace, name, { uid: live.metadata.uid });
      }
      await releaseGatewayEndpoints(pool, endpointSource(pgw), pgw.spec.plan);
      claim = await claimGatewayEndpoint(
        pool,
        // spec.tls: its pods mount a certificate and serve TLS on the port (docs/adr/0083).
        {
          plan: pgw.spec.plan,
          host: pgw.spec.advertisedHost,
          port: pgw.spec.port,
          tls: pgw.spec.tls !== undefined,
          // docs/adr/0096: generate then hands out the https:// form only.
          refuseCredentialsInClear: pgw.spec.tls?.refuseCredentialsInClear ?? false,
          // GET /api/v1/locations and generate's refusal of targets no exit serves (docs/adr/0100).
          locations: exitLocations(pgw.spec.exits),
        },
        endpointSource(pgw),
      );
    } catch (err) {
      await writeStatus({
        gateway: pgw,
        deployment: observedDeployment(pgw),
        applied: { kind: 'failed', error: (err as Error).message },
        placement,
      });
      throw err;
    }
    const conflict = claim.claimed ? undefined : claim.owner;
    const exits = await podExits(pgw);
    await writeStatus({
      gateway: pgw,
      deployment: observedDeployment(pgw),
      applied: notOwned.length > 0 ? { kind: 'notOwned', objects: notOwned } : { kind: 'applied' },
      planOwner: conflict,
      placement,
      exits,
    });
    if (conflict !== undefined) return { requeueAfterMs: PLAN_CONFLICT_RETRY_MS };
    if (notOwned.length > 0) return { requeueAfterMs: NOT_OWNED_RETRY_MS };
    clean.add(key);
    return refresh(pgw, exits);
  };

  function observedDeployment(pgw: ProxyGateway): Deployment | undefined {
    return deps.deployments.get(`${pgw.metadata.namespace}/${childName(pgw)}`);
  }

  function podExits(pgw: ProxyGateway): Promise<PodExits[]> {
    return readPodExits(pool, pgw.spec.plan, childName(pgw));
  }

  /** Requeued for the exits' refresh while the Deployment has pods or some pod still beats. */
  function refresh(pgw: ProxyGateway, exits: readonly PodExits[]): ReconcileResult | undefined {
    const pods = observedDeployment(pgw)?.status?.replicas ?? 0;
    return pods > 0 || exits.length > 0 ? { requeueAfterMs: EXITS_REFRESH_MS } : undefined;
  }

  /**
   * Autoscaled: our apply does not set spec.replicas (the HPA owns it). A new Deployment would
   * then start at the API server's default of 1 although minReplicas is higher, so it is created
   * with replicas = min, which is then handed to another field manager like any existing one.
   * Fixed -> autoscaled: were we still the only owner of spec.replicas, dropping it from our apply
   * would reset it to 1 until the HPA scales back up. As the Kubernetes docs describe for
   * migrating to an HPA, first give the current value to another field manager, so dropping it
   * from our apply leaves it in place.
   */
  async function prepareReplicas(
    pgw: ProxyGateway,
    desired: KubeObject,
    live: Deployment | undefined,
    { autoscaled, replicas: bounds }: Desired,
  ): Promise<void> {
    if (!autoscaled) return;
    let replicas = live?.spec?.replicas;
    if (!live) {
      replicas = bounds.min;
      const spec = (desired as Deployment).spec ?? {};
      const created = await client.apply<Deployment>(
        RESOURCES.deployment,
        { ...desired, spec: { ...spec, replicas } } as KubeObject,
        { fieldManager: FIELD_MANAGER, force: true },
      );
      live = created;
    }
    if (replicas === undefined) return;
    const ownedByUs = live.metadata.managedFields?.some(
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

  /** Computes the status from what was observed (status.ts, placement.ts), writes it, and records the transitions as Events. */
  async function writeStatus(
    inputs: StatusInputs & { gateway: ProxyGateway; placement: PlacementView | undefined },
  ): Promise<void> {
    const { gateway: pgw } = inputs;
    const status = gatewayStatus(inputs);
    // Without hostNetwork a HostNetwork condition left from before goes (status is applied whole).
    status.conditions = setConditions(
      status.conditions?.filter((c) => inputs.placement || c.type !== HOST_NETWORK_CONDITION),
      placementConditions(pgw, inputs.placement, status),
      pgw.metadata.generation,
    );
    const resumed = resumedConditions(pgw.status?.conditions);
    if (resumed.length > 0)
      status.conditions = setConditions(status.conditions, resumed, pgw.metadata.generation);
    // Unchanged: no write (every write is an update event to every watcher, this operator too).
    if (sameStatus(pgw.status, status)) return;
    await applyStatus(client, PROXY_GATEWAY, pgw, status, FIELD_MANAGER);
    await recordResumed(recorder, pgw);
    for (const e of [
      ...statusEvents(pgw.status?.conditions, status.conditions),
      ...placementEvents(pgw.status?.conditions, status.conditions),
    ])
      await recorder.record(pgw, e.type, e.reason, e.message);
  }
}

/** Whether the status the CR has is the one computed (as JSON: fields left undefined are absent). */
function sameStatus(current: ProxyGateway['status'], next: ProxyGatewayStatus): boolean {
  return (
    current !== undefined &&
    isDeepStrictEqual(JSON.parse(JSON.stringify(current)), JSON.parse(JSON.stringify(next)))
  );
}
