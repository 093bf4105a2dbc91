// The gateway pod of a ProxyGateway's Deployment (desired.ts puts it in the template): where it
// finds its files (the ConfigMap's gateway.yaml, the upstreams Secret, the TLS Secret), its one
// container (ports, environment, probes, the preStop that drains it, resources, security), its
// volumes, and where it runs (spec's placement fields; hostNetwork, docs/adr/0116). A pure function
// of the CR and the operator's options, held by desired.ts's golden files.
import type { ProxyGateway } from '../crds/types.generated.ts';
import type { GatewayNetworkPolicyOptions } from './network-policy.ts';
import { healthPort } from './placement.ts';

/** The operator's options for every gateway pod (its PROXYFLEET_GATEWAY_* settings, controllers/src/config.ts). */
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
  /** The gateways' NetworkPolicy (network-policy.ts); undefined: none, and an owned one is removed. */
  networkPolicy?: GatewayNetworkPolicyOptions | undefined;
}

export const CONFIG_DIR = '/etc/proxyfleet';
export const CONFIG_FILE = 'gateway.yaml';
/**
 * The bound of the pod's preStop (GET /prestop: readiness false, then accepting until no new
 * connection comes, common/src/prestop.ts, which gives up at 15 s), counted in the termination
 * grace before the drain (docs/adr/0094).
 */
export const PRE_STOP_SECONDS = 20;
/** Upper bound on the time given to open tunnels to finish (tunnels may live up to maxLifetimeSeconds). */
export const MAX_DRAIN_SECONDS = 300;
const DEFAULT_RESOURCES = { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '512Mi' } };

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

export const drainSeconds = (pgw: ProxyGateway) =>
  Math.min(pgw.spec.timeouts.maxLifetimeSeconds, MAX_DRAIN_SECONDS);

/**
 * The pod spec: `configMap` names the ConfigMap of gateway.yaml, `selector` the pods (spread over
 * zones and nodes unless spec.topologySpreadConstraints says otherwise), `upstreams` whether the
 * upstreams Secret holds URLs to mount.
 */
export function gatewayPod(
  pgw: ProxyGateway,
  options: GatewayOptions,
  {
    configMap,
    selector,
    upstreams,
  }: { configMap: string; selector: Record<string, string>; upstreams: boolean },
) {
  const { tls, hostNetwork } = pgw.spec;
  const drain = drainSeconds(pgw);
  const health = healthPort(pgw);
  // With hostNetwork the ports bind on the node: declared as host ports, the scheduler's port
  // check keeps two pods that bind one (this gateway's, or another's) off the same node.
  const port = (name: string, containerPort: number) => ({
    name,
    containerPort,
    ...(hostNetwork ? { hostPort: containerPort } : {}),
    protocol: 'TCP',
  });
  return {
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    terminationGracePeriodSeconds: PRE_STOP_SECONDS + drain + 5,
    securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
    // The node's network namespace: its addresses for sourceAddress exits; cluster DNS still
    // (ClusterFirst would fall back to the node's resolv.conf with hostNetwork).
    ...(hostNetwork ? { hostNetwork: true, dnsPolicy: 'ClusterFirstWithHostNet' } : {}),
    ...placement(pgw),
    topologySpreadConstraints: spread(pgw, selector),
    containers: [
      {
        name: 'gateway',
        image: options.image,
        imagePullPolicy: options.imagePullPolicy,
        command: ['node', 'gateway/src/main.ts'],
        // Every port the gateway listens on: health also serves /metrics (gateway/src/main.ts).
        ports: [port('proxy', pgw.spec.port), port('health', health)],
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
          { name: 'PROXYFLEET_HEALTH_PORT', value: String(health) },
          // On the node's network /prestop (it turns the pod unready) and /metrics would answer on
          // every node address, the public ones too: bind the pod IP, the node's internal address,
          // where the kubelet's probes and Prometheus come.
          ...(hostNetwork
            ? [{ name: 'PROXYFLEET_HEALTH_HOST', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } }]
            : []),
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
          ...(upstreams ? [{ name: 'upstreams', mountPath: UPSTREAMS_DIR, readOnly: true }] : []),
          ...(tls ? [{ name: 'tls', mountPath: TLS_DIR, readOnly: true }] : []),
        ],
      },
    ],
    volumes: [
      { name: 'config', configMap: { name: configMap } },
      { name: 'tmp', emptyDir: {} },
      ...(upstreams ? [{ name: 'upstreams', secret: { secretName: upstreamsSecretName(pgw) } }] : []),
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
  };
}

/** The scheduling fields the spec sets, as the pod spec names them. */
function placement(pgw: ProxyGateway) {
  const { nodeSelector, tolerations, affinity, priorityClassName } = pgw.spec;
  return {
    ...(nodeSelector ? { nodeSelector } : {}),
    ...(affinity ? { affinity } : {}),
    ...(tolerations ? { tolerations } : {}),
    ...(priorityClassName ? { priorityClassName } : {}),
  };
}

/**
 * The spec's spread constraints (a constraint without a labelSelector counts this gateway's
 * pods), else the default: spread over zones and nodes, never blocking scheduling.
 */
function spread(pgw: ProxyGateway, selector: Record<string, string>) {
  // A copy each: one object in two places would be a YAML alias in the golden files.
  const own = () => ({ matchLabels: { ...selector } });
  const given = pgw.spec.topologySpreadConstraints;
  if (given) return given.map((c) => ({ ...c, labelSelector: c.labelSelector ?? own() }));
  return ['topology.kubernetes.io/zone', 'kubernetes.io/hostname'].map((topologyKey) => ({
    maxSkew: 1,
    topologyKey,
    whenUnsatisfiable: 'ScheduleAnyway',
    labelSelector: own(),
  }));
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
