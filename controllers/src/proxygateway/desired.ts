// The objects a ProxyGateway should produce: a pure function of the CR and the operator's
// options, tested with golden files (testdata/). ConfigMap (the gateway's YAML, what
// gateway/src/spec.ts reads), Deployment, Service, PodDisruptionBudget, and an autoscaling/v2
// HorizontalPodAutoscaler when replicas.max > replicas.min. While the HPA exists the Deployment's
// replicas field is left out of what we apply, so the HPA alone owns it.
import { createHash } from 'node:crypto';
import { stringify } from 'yaml';
import type { KubeObject, Resource } from '../runtime/kube.ts';
import { RESOURCES } from '../runtime/resources.ts';
import { API_VERSION, MANAGED_BY, MANAGED_BY_LABEL } from '../crds/resources.ts';
import type { ProxyGateway } from '../crds/types.generated.ts';

export interface GatewayOptions {
  image: string;
  imagePullPolicy: 'Always' | 'IfNotPresent' | 'Never';
  /**
   * The Secret (in the ProxyGateway's namespace) holding the database URL, and the key of the
   * session URL when the gateways reach the database through a transaction pooler (ADR 0068).
   */
  databaseSecret: { name: string; key: string; sessionKey?: string };
  /** `transaction`: the URL is a transaction-mode pooler (PROXYFLEET_DB_POOLING). */
  dbPooling?: 'session' | 'transaction';
  logLevel: string;
  relayUrl?: string | undefined; // the gateway pods' PROXYFLEET_RELAY_URL (docs/adr/0105)
  /** PROXYFLEET_GATEWAY_ALLOW_CIDRS of the gateway pods; empty: the destination guard has no exemption. */
  allowCidrs?: string[];
}

export const HEALTH_PORT = 9090;
export const CONFIG_DIR = '/etc/proxyfleet';
export const CONFIG_FILE = 'gateway.yaml';
/**
 * The bound of the pod's preStop (GET /prestop: readiness false, then accepting until no new
 * connection comes, gateway/src/prestop.ts, which gives up at 15 s), counted in the termination
 * grace before the drain (docs/adr/0094).
 */
export const PRE_STOP_SECONDS = 20;
/** Upper bound on the time given to open tunnels to finish (tunnels may live up to maxLifetimeSeconds). */
export const MAX_DRAIN_SECONDS = 300;
export const ACTIVE_CONNECTIONS_METRIC = 'proxyfleet_gateway_active_connections';
const DEFAULT_RESOURCES = { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '512Mi' } };

export interface DesiredObject {
  resource: Resource;
  object: KubeObject;
}

export interface Desired {
  objects: DesiredObject[];
  /** Kinds that must not exist for this ProxyGateway (the HPA when scaling is fixed). */
  absent: Array<{ resource: Resource; name: string }>;
  /** Whether the HPA owns the Deployment's replicas. */
  autoscaled: boolean;
}

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

/**
 * Where the gateway finds its TLS certificate (spec.tls.secretName, a kubernetes.io/tls Secret):
 * the kubelet updates the files when the Secret changes and the gateway reloads them
 * (docs/adr/0071), so a renewed certificate needs no new pods.
 */
export const TLS_DIR = '/etc/proxyfleet-tls';
const TLS_FILES = ['tls.crt', 'tls.key'];

/** Where the gateway finds the upstream URLs that carry credentials (a Secret volume). */
export const UPSTREAMS_DIR = '/etc/proxyfleet-upstreams';
export const upstreamsSecretName = (pgw: ProxyGateway) => `${pgw.metadata.name}-gateway-upstreams`;

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
    apiVersion: API_VERSION,
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

export const drainSeconds = (pgw: ProxyGateway) =>
  Math.min(pgw.spec.timeouts.maxLifetimeSeconds, MAX_DRAIN_SECONDS);

export function desiredObjects(pgw: ProxyGateway, options: GatewayOptions): Desired {
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
  const { min, max } = pgw.spec.replicas;
  const autoscaled = max > min;
  const tls = pgw.spec.tls;
  const drain = drainSeconds(pgw);

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
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
      template: {
        metadata: {
          labels: labels(pgw),
          annotations: { 'proxyfleet.io/config-sha256': configHash },
        },
        spec: {
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          terminationGracePeriodSeconds: PRE_STOP_SECONDS + drain + 5,
          securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
          topologySpreadConstraints: [
            {
              maxSkew: 1,
              topologyKey: 'topology.kubernetes.io/zone',
              whenUnsatisfiable: 'ScheduleAnyway',
              labelSelector: { matchLabels: selectorLabels(pgw) },
            },
            {
              maxSkew: 1,
              topologyKey: 'kubernetes.io/hostname',
              whenUnsatisfiable: 'ScheduleAnyway',
              labelSelector: { matchLabels: selectorLabels(pgw) },
            },
          ],
          containers: [
            {
              name: 'gateway',
              image: options.image,
              imagePullPolicy: options.imagePullPolicy,
              command: ['node', 'gateway/src/main.ts'],
              ports: [
                { name: 'proxy', containerPort: pgw.spec.port, protocol: 'TCP' },
                { name: 'health', containerPort: HEALTH_PORT, protocol: 'TCP' },
              ],
              env: [
                { name: 'PROXYFLEET_GATEWAY_CONFIG', value: `${CONFIG_DIR}/${CONFIG_FILE}` },
                { name: 'PROXYFLEET_GATEWAY_ID', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
                {
                  name: 'DATABASE_URL',
                  valueFrom: {
                    secretKeyRef: { name: options.databaseSecret.name, key: options.databaseSecret.key },
                  },
                },
                ...databaseSessionEnv(options),
                { name: 'PROXYFLEET_HEALTH_PORT', value: String(HEALTH_PORT) },
                { name: 'PROXYFLEET_SHUTDOWN_GRACE_SECONDS', value: String(drain) },
                { name: 'PROXYFLEET_LOG_LEVEL', value: options.logLevel },
                ...(tls
                  ? [
                      { name: 'PROXYFLEET_GATEWAY_TLS_CERT', value: `${TLS_DIR}/tls.crt` },
                      { name: 'PROXYFLEET_GATEWAY_TLS_KEY', value: `${TLS_DIR}/tls.key` },
                    ]
                  : []),
                ...(options.allowCidrs?.length
                  ? [{ name: 'PROXYFLEET_GATEWAY_ALLOW_CIDRS', value: options.allowCidrs.join(',') }]
                  : []),
              ],
              readinessProbe: {
                httpGet: { path: '/readyz', port: 'health' },
                periodSeconds: 5,
                failureThreshold: 2,
              },
              livenessProbe: {
                httpGet: { path: '/healthz', port: 'health' },
                periodSeconds: 10,
                failureThreshold: 3,
              },
              lifecycle: { preStop: { httpGet: { path: '/prestop', port: 'health' } } },
              resources: pgw.spec.resources ?? DEFAULT_RESOURCES,
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                capabilities: { drop: ['ALL'] },
              },
              volumeMounts: [
                { name: 'config', mountPath: CONFIG_DIR, readOnly: true },
                { name: 'tmp', mountPath: '/tmp' },
                ...(secrets.length ? [{ name: 'upstreams', mountPath: UPSTREAMS_DIR, readOnly: true }] : []),
                ...(tls ? [{ name: 'tls', mountPath: TLS_DIR, readOnly: true }] : []),
              ],
            },
          ],
          volumes: [
            { name: 'config', configMap: { name } },
            { name: 'tmp', emptyDir: {} },
            ...(secrets.length
              ? [{ name: 'upstreams', secret: { secretName: upstreamsSecretName(pgw) } }]
              : []),
            // Not optional: until the Secret exists (cert-manager still issuing) the pods wait,
            // rather than serve without the TLS the plan promises.
            ...(tls
              ? [
                  {
                    name: 'tls',
                    secret: {
                      secretName: tls.secretName,
                      items: TLS_FILES.map((key) => ({ key, path: key })),
                    },
                  },
                ]
              : []),
          ],
        },
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
    { resource: RESOURCES.deployment, object: deployment },
    { resource: RESOURCES.service, object: service },
    { resource: RESOURCES.pdb, object: pdb },
  ];
  const absent: Desired['absent'] = [];
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
  return { objects, absent, autoscaled };
}

type EnvVar = { name: string; value?: string; valueFrom?: Record<string, unknown> };
/** The session URL and pooling mode (behind a transaction pooler), and the change relay. */
function databaseSessionEnv(options: GatewayOptions): EnvVar[] {
  const env: EnvVar[] = [];
  if (options.databaseSecret.sessionKey)
    env.push({
      name: 'PROXYFLEET_DATABASE_SESSION_URL',
      valueFrom: {
        secretKeyRef: { name: options.databaseSecret.name, key: options.databaseSecret.sessionKey },
      },
    });
  if (options.dbPooling === 'transaction') env.push({ name: 'PROXYFLEET_DB_POOLING', value: 'transaction' });
  if (options.relayUrl) env.push({ name: 'PROXYFLEET_RELAY_URL', value: options.relayUrl });
  return env;
}

/** The named fields of `o` that are set. */
function pick<T extends object, K extends keyof T>(o: T, ...keys: K[]): Partial<Pick<T, K>> {
  const set = keys.filter((k) => o[k] !== undefined);
  return Object.fromEntries(set.map((k) => [k, o[k]])) as Partial<Pick<T, K>>;
}
