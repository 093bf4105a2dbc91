// Wires the two controllers to the runtime: informers (owned objects selected by our
// managed-by label, and the nodes for hostNetwork gateways' placement), queues, reconcilers, and
// Lease leader election. Only the leader runs controllers; losing the Lease stops them (main.ts
// then exits so the pod restarts clean).
import type { Registry } from 'prom-client';
import type { Pool } from '#common/db/pool.ts';
import type { Logger } from '#common/logger.ts';
import { apiKeyReconciler } from './apikey/reconciler.ts';
import { API_KEY, MANAGED_BY, MANAGED_BY_LABEL, PROXY_GATEWAY } from './crds/resources.ts';
import type { ApiKey, ProxyGateway } from './crds/types.generated.ts';
import type { GatewayOptions } from './proxygateway/pod.ts';
import { PlacementPeers } from './proxygateway/peers.ts';
import type { NodeObject } from './proxygateway/placement.ts';
import { proxyGatewayReconciler } from './proxygateway/reconciler.ts';
import { Controller, controllerOwnerKey } from './runtime/controller.ts';
import { createEventRecorder } from './runtime/events.ts';
import { Informer, type InformerOptions } from './runtime/informer.ts';
import type { KubeClient, KubeObject } from './runtime/kube.ts';
import { LeaderElector, type LeaderElectionOptions } from './runtime/leader.ts';
import { ControllerMetrics } from './runtime/metrics.ts';
import { RESOURCES } from './runtime/resources.ts';

export interface OperatorOptions {
  client: KubeClient;
  pool: Pool;
  logger: Logger;
  registry: Registry;
  gateway: GatewayOptions;
  /** The operator's own namespace: its ApiKeys may name any account (others need a bound namespace). */
  operatorNamespace?: string;
  /**
   * Watch these namespaces only (one set of informers and controllers each, so the operator needs
   * rights in these namespaces only: the chart's namespaced install mode binds Roles there);
   * unset or empty: all namespaces.
   */
  watchNamespaces?: string[];
  resyncMs?: number;
  informer?: Pick<InformerOptions, 'watchTimeoutSeconds' | 'minBackoffMs' | 'maxBackoffMs'>;
  /** false: run the controllers without a Lease (tests of one instance, dev). */
  leaderElection:
    | false
    | {
        namespace: string;
        name: string;
        identity: string;
        owner?: LeaderElectionOptions['owner'];
        leaseDurationMs?: number;
        renewDeadlineMs?: number;
        retryPeriodMs?: number;
      };
  /** Called when leadership is lost after having been held (main.ts exits). */
  onLeadershipLost?: () => void;
}

export const LEASE_NAME = 'proxyfleet-operator';
/**
 * How long the controllers wait for the first node list: long enough that hostNetwork gateways
 * are first applied with their replicas capped, short enough that an operator without the right
 * to list nodes still runs (its hostNetwork gateways then say NodesNotListed).
 */
const NODE_SYNC_WAIT_MS = 10_000;
const MANAGED_SELECTOR = `${MANAGED_BY_LABEL}=${MANAGED_BY}`;

export class Operator {
  private readonly o: OperatorOptions;
  readonly metrics: ControllerMetrics;
  readonly registry: Registry;
  private controllers: Array<Controller<KubeObject>> = [];
  private nodes: Informer<NodeObject> | undefined;
  private elector: LeaderElector | undefined;
  private running = false;

  constructor(options: OperatorOptions) {
    this.o = options;
    this.registry = options.registry;
    this.metrics = new ControllerMetrics(options.registry);
  }

  get leading(): boolean {
    return this.running;
  }

  /** Informers of the running controllers (tests inspect restarts). */
  get informers() {
    return this.controllers.flatMap((c) => c.informers);
  }

  async start(): Promise<void> {
    const le = this.o.leaderElection;
    if (!le) return this.startControllers();
    this.elector = new LeaderElector({
      client: this.o.client,
      logger: this.o.logger,
      ...le,
      onStartedLeading: () => this.startControllers(),
      onStoppedLeading: async () => {
        const wasRunning = this.running;
        await this.stopControllers();
        if (wasRunning) this.o.onLeadershipLost?.();
      },
    });
    this.elector.start();
  }

  async stop(): Promise<void> {
    if (this.elector) {
      this.o.onLeadershipLost = undefined;
      await this.elector.stop();
    }
    await this.stopControllers();
  }

  private async startControllers(): Promise<void> {
    if (this.running) return;
    this.running = true;
    this.metrics.leader.set(1);
    const namespaces = this.o.watchNamespaces?.length ? this.o.watchNamespaces : [undefined];
    // Nodes are cluster-scoped: one informer for every namespace's controllers.
    this.nodes = new Informer<NodeObject>(this.o.client, RESOURCES.node, this.o.logger, this.o.informer);
    const peers = new PlacementPeers(this.nodes);
    this.controllers = namespaces.flatMap((ns) =>
      this.controllersFor(ns, namespaces.length > 1 && ns ? `:${ns}` : '', peers),
    );
    try {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        this.nodes.start(),
        new Promise((resolve) => (timer = setTimeout(resolve, NODE_SYNC_WAIT_MS))),
      ]);
      clearTimeout(timer);
      if (!this.nodes.synced)
        this.o.logger.warn('no node list yet: hostNetwork gateways are not capped at their nodes');
      await Promise.all(this.controllers.map((c) => c.start()));
    } catch (err) {
      await this.stopControllers();
      throw err;
    }
  }

  /** The two controllers for one namespace (undefined: every namespace). */
  private controllersFor(
    ns: string | undefined,
    suffix: string,
    peers: PlacementPeers,
  ): Array<Controller<KubeObject>> {
    const { client, pool, logger } = this.o;
    const inf = <T extends KubeObject>(r: typeof PROXY_GATEWAY, labelSelector?: string) =>
      new Informer<T>(client, r, logger, { ...this.o.informer, namespace: ns, labelSelector });
    const recorder = createEventRecorder(client, 'proxyfleet-operator', logger);

    const gateways = inf<ProxyGateway>(PROXY_GATEWAY);
    const deployments = inf<KubeObject>(RESOURCES.deployment, MANAGED_SELECTOR);
    const owned = (r: typeof PROXY_GATEWAY) => ({
      informer: inf<KubeObject>(r, MANAGED_SELECTOR),
      ownerKey: controllerOwnerKey('ProxyGateway'),
    });
    const pgwController = new Controller<ProxyGateway>({
      name: `proxygateway${suffix}`,
      primary: gateways,
      owned: [
        { informer: deployments, ownerKey: controllerOwnerKey('ProxyGateway') },
        // Every kind of child is watched, so drift (a deleted or edited child) is repaired at once.
        owned(RESOURCES.configMap),
        owned(RESOURCES.service),
        owned(RESOURCES.pdb),
        owned(RESOURCES.hpa),
        owned(RESOURCES.networkPolicy),
      ],
      reconcile: proxyGatewayReconciler({
        client,
        pool,
        gateways,
        deployments,
        recorder,
        logger,
        options: this.o.gateway,
        placement: peers,
      }),
      logger,
      metrics: this.metrics,
      resyncMs: this.o.resyncMs,
    });
    peers.add(gateways, pgwController.queue);

    const apiKeys = inf<ApiKey>(API_KEY);
    const akController = new Controller<ApiKey>({
      name: `apikey${suffix}`,
      primary: apiKeys,
      // No informer on Secrets: list/watch on every Secret in the cluster is more privilege than
      // it is worth; a changed or deleted key Secret shows at the next status refresh.
      reconcile: apiKeyReconciler({
        client,
        pool,
        apiKeys,
        recorder,
        logger,
        operatorNamespace: this.o.operatorNamespace,
      }),
      logger,
      metrics: this.metrics,
      resyncMs: this.o.resyncMs,
    });
    return [pgwController, akController] as unknown as Array<Controller<KubeObject>>;
  }

  private async stopControllers(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.metrics.leader.set(0);
    this.nodes?.stop();
    this.nodes = undefined;
    await Promise.all(this.controllers.map((c) => c.stop()));
    this.controllers = [];
  }
}
