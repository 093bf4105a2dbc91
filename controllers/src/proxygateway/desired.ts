// The objects a ProxyGateway should produce: a pure function of the CR and the operator's
// options, tested with golden files (testdata/). ConfigMap (the gateway's YAML, what
// gateway/src/spec.ts reads), Deployment (its pod in pod.ts), Service, PodDisruptionBudget, the
// upstreams Secret, and an autoscaling/v2 HorizontalPodAutoscaler when replicas.max >
// replicas.min. While the HPA exists the Deployment's replicas field is left out of what we
// apply, so the HPA alone owns it. With hostNetwork the replica bounds are capped at the nodes the
// pods may run on (placement.ts) and a rollout replaces pods in place (no surge). A NetworkPolicy
// when the operator has its options and the pods are not hostNetwork (network-policy.ts).
import { createHash } from 'node:crypto';
import { stringify } from 'yaml';
import type { KubeObject, Resource } from '../runtime/kube.ts';
import { RESOURCES } from '../runtime/resources.ts';
import { API_VERSION, GATEWAY_CONFIG_API_VERSION, MANAGED_BY, MANAGED_BY_LABEL } from '../crds/resources.ts';
import type { ProxyGateway } from '../crds/types.generated.ts';
import { CONFIG_FILE, gatewayPod, UPSTREAMS_DIR, upstreamsSecretName, type GatewayOptions } from './pod.ts';
import { replicaBounds } from './placement.ts';
import { gatewayNetworkPolicySpec } from './network-policy.ts';

export interface DesiredObject {
  resource: Resource;
  object: KubeObject;
}

export interface Desired {
  objects: DesiredObject[];
  /**
   * Kinds that must not exist for this ProxyGateway: the HPA when scaling is fixed, the
   * NetworkPolicy when it is off or the pods are hostNetwork.
   */
  absent: Array<{ resource: Resource; name: string }>;
  /** Whether the HPA owns the Deployment's replicas. */
  autoscaled: boolean;
  /** The replica bounds applied: spec.replicas, capped at the nodes with hostNetwork. */
  replicas: { min: number; max: number };
}

export const ACTIVE_CONNECTIONS_METRIC = 'proxyfleet_gateway_active_connections';

export const childName = (pgw: ProxyGateway) => `${pgw.metadata.name}-gateway`;

export function selectorLabels(pgw: ProxyGateway): Record<string, string> {
  return { 'app.kubernetes.io/name': 'proxyfleet-gateway', 'proxyfleet.io/proxygateway': pgw.metadata.name };
}

export function labels(pgw: ProxyGateway): Record<string, string> {
  return {
    ...selectorLabels(pgw),
    'app.kubernetes.io/instance': pgw.metadata.name,
    'app.kubernetes.io/component': 'gateway',
    'app.kubernetes.io/part-of': 'proxyfleet',
    [MANAGED_BY_LABEL]: MANAGED_BY,
    'proxyfleet.io/plan': pgw.spec.plan,
  };
}

/** Upstream URLs with a user or password, by Secret key (exit-<index>): they never go in the ConfigMap. */
export function upstreamSecrets(pgw: ProxyGateway): Map<number, { key: string; url: string }> {
  const out = new Map<number, { key: string; url: string }>();
  pgw.spec.exits.forEach((exit, i) => {
    const url = exit.upstream?.url;
    if (!url) return;
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return;
    }
    if (parsed.username || parsed.password) out.set(i, { key: `exit-${i}`, url });
  });
  return out;
}

/**
 * The gateway's own configuration: one ProxyGateway without the Kubernetes-only fields. An
 * upstream URL with credentials is replaced by `urlFile`, a file of the upstreams Secret's
 * volume (gateway/src/spec.ts reads it): passwords stay out of the ConfigMap.
 */
export function gatewayConfigYaml(pgw: ProxyGateway): string {
  const { plan, port, advertisedHost, session, timeouts, limits, throttle, tls, proxyProtocol } = pgw.spec;
  const secrets = upstreamSecrets(pgw);
  const exits = pgw.spec.exits.map((exit, i) => {
    const secret = secrets.get(i);
    return secret ? { ...exit, upstream: { urlFile: `${UPSTREAMS_DIR}/${secret.key}` } } : exit;
  });
  return stringify({
    apiVersion: GATEWAY_CONFIG_API_VERSION,
    kind: 'ProxyGateway',
    metadata: { name: pgw.metadata.name, namespace: pgw.metadata.namespace },
    spec: {
      plan,
      port,
      advertisedHost,
      exits,
      session,
      timeouts,
      limits,
      ...(throttle ? { throttle } : {}),
      // The Secret's name is the operator's business; the gateway reads the mounted files.
      ...(tls ? { tls: { refuseCredentialsInClear: tls.refuseCredentialsInClear } } : {}),
      ...(proxyProtocol ? { proxyProtocol } : {}),
    },
  });
}

/**
 * `nodeCount`: the nodes a hostNetwork gateway's pods may run on (one pod each); undefined when
 * not known (the bounds are then spec.replicas).
 */
export function desiredObjects(pgw: ProxyGateway, options: GatewayOptions, nodeCount?: number): Desired {
  const name = childName(pgw);
  const namespace = pgw.metadata.namespace;
  const meta = (extra: Record<string, unknown> = {}) => ({
    name,
    namespace,
    labels: labels(pgw),
    ownerReferences: [
      {
        apiVersion: API_VERSION,
        kind: 'ProxyGateway',
        name: pgw.metadata.name,
        uid: pgw.metadata.uid ?? '',
        controller: true,
        blockOwnerDeletion: true,
      },
    ],
    ...extra,
  });
  const config = gatewayConfigYaml(pgw);
  const secrets = [...upstreamSecrets(pgw).values()];
  // The hash covers the upstream URLs too, so a changed upstream password rolls the pods.
  const configHash = createHash('sha256')
    .update(config)
    .update(secrets.map((x) => `${x.key}=${x.url}`).join('\n'))
    .digest('hex')
    .slice(0, 16);
  const { min, max } = replicaBounds(pgw, nodeCount);
  // From the spec, not the capped bounds: the HPA stays when the nodes cap max down to min.
  const autoscaled = pgw.spec.replicas.max > pgw.spec.replicas.min;

  const configMap = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: meta(),
    data: { [CONFIG_FILE]: config },
  };

  const deployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: meta(),
    spec: {
      // Autoscaled: the HPA owns replicas (the reconciler hands them off first, see handOffReplicas).
      ...(autoscaled ? {} : { replicas: min }),
      revisionHistoryLimit: 5,
      selector: { matchLabels: selectorLabels(pgw) },
      // Never below the serving count during a rollout: a new pod is ready before an old one drains.
      // With hostNetwork a surge pod would wait for the ports of a node that every pod already
      // holds (replicas capped at the nodes), so the rollout replaces one pod at a time instead.
      strategy: {
        type: 'RollingUpdate',
        rollingUpdate: pgw.spec.hostNetwork
          ? { maxSurge: 0, maxUnavailable: 1 }
          : { maxSurge: 1, maxUnavailable: 0 },
      },
      template: {
        metadata: {
          // The operator's own last: the Deployment selects its pods by them (CEL refuses them too).
          labels: { ...pgw.spec.podLabels, ...labels(pgw) },
          annotations: { ...pgw.spec.podAnnotations, 'proxyfleet.io/config-sha256': configHash },
        },
        spec: gatewayPod(pgw, options, {
          configMap: name,
          selector: selectorLabels(pgw),
          upstreams: secrets.length > 0,
        }),
      },
    },
  };

  const service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: meta(pgw.spec.service.annotations ? { annotations: pgw.spec.service.annotations } : {}),
    spec: {
      type: pgw.spec.service.type,
      // Local: no SNAT, the pods see the client (docs/adr/0102); else the PROXY protocol says it.
      ...pick(pgw.spec.service, 'externalTrafficPolicy', 'loadBalancerSourceRanges'),
      selector: selectorLabels(pgw),
      ports: [{ name: 'proxy', port: pgw.spec.port, targetPort: 'proxy', protocol: 'TCP' }],
    },
  };

  const pdb = {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: meta(),
    spec: { maxUnavailable: 1, selector: { matchLabels: selectorLabels(pgw) } },
  };

  const upstreams = {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { ...meta(), name: upstreamsSecretName(pgw) },
    type: 'Opaque',
    data: Object.fromEntries(secrets.map((x) => [x.key, Buffer.from(x.url).toString('base64')])),
  };

  const objects: DesiredObject[] = [
    // Always present (empty without credentials: the cluster-wide install has no delete on
    // Secrets), before the Deployment that mounts it.
    { resource: RESOURCES.secret, object: upstreams },
    { resource: RESOURCES.configMap, object: configMap },
  ];
  const absent: Desired['absent'] = [];
  // Before the Deployment, so no pod of a new gateway runs without it. hostNetwork: a policy would
  // not apply to the pods (the node's network namespace), so none is kept.
  if (options.networkPolicy && !pgw.spec.hostNetwork) {
    const policy = {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: meta(),
      spec: gatewayNetworkPolicySpec(pgw, selectorLabels(pgw), options.networkPolicy, options.allowCidrs),
    };
    objects.push({ resource: RESOURCES.networkPolicy, object: policy });
  } else {
    absent.push({ resource: RESOURCES.networkPolicy, name });
  }
  objects.push(
    { resource: RESOURCES.deployment, object: deployment },
    { resource: RESOURCES.service, object: service },
    { resource: RESOURCES.pdb, object: pdb },
  );
  if (autoscaled) {
    const metrics: unknown[] = [
      {
        type: 'Resource',
        resource: {
          name: 'cpu',
          target: {
            type: 'Utilization',
            averageUtilization: pgw.spec.autoscaling.targetCPUUtilizationPercent,
          },
        },
      },
    ];
    const perPod = pgw.spec.autoscaling.targetActiveConnectionsPerPod;
    if (perPod !== undefined) {
      metrics.push({
        type: 'Pods',
        pods: {
          metric: { name: ACTIVE_CONNECTIONS_METRIC },
          target: { type: 'AverageValue', averageValue: String(perPod) },
        },
      });
    }
    const hpa = {
      apiVersion: 'autoscaling/v2',
      kind: 'HorizontalPodAutoscaler',
      metadata: meta(),
      spec: {
        scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name },
        minReplicas: min,
        maxReplicas: max,
        metrics,
        // Scale down slowly: every removed pod drains its tunnels.
        behavior: {
          scaleDown: {
            stabilizationWindowSeconds: 300,
            policies: [{ type: 'Pods', value: 1, periodSeconds: 60 }],
          },
        },
      },
    };
    objects.push({ resource: RESOURCES.hpa, object: hpa });
  } else {
    absent.push({ resource: RESOURCES.hpa, name });
  }
  return { objects, absent, autoscaled, replicas: { min, max } };
}

/** The named fields of `o` that are set. */
function pick<T extends object, K extends keyof T>(o: T, ...keys: K[]): Partial<Pick<T, K>> {
  const set = keys.filter((k) => o[k] !== undefined);
  return Object.fromEntries(set.map((k) => [k, o[k]])) as Partial<Pick<T, K>>;
}
