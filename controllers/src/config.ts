import { hostname } from 'node:os';
import { z } from 'zod';
import {
  baseEnv,
  bool,
  cidrList,
  logLevel,
  parseConfig,
  relayUrlEnv,
  port,
  positiveInt,
  type Env,
} from '#common/config.ts';
import { gatewayNetworkPolicyEnv } from './proxygateway/network-policy.ts';

export const controllerEnv = {
  PROXYFLEET_HEALTH_PORT: port(9092),
  /** Path to a kubeconfig; unset: in-cluster service account, then ~/.kube/config. */
  KUBECONFIG: z.string().optional(),
  /** Namespace of the Lease used for leader election (the pod's namespace in a cluster). */
  PROXYFLEET_NAMESPACE: z.string().min(1).default('proxyfleet'),
  /** This instance's identity in the Lease: the pod name (downward API) in a cluster. */
  PROXYFLEET_POD_NAME: z.string().min(1).default(hostname()),
  /** This pod's uid (downward API): the leader-election Lease names the pod as its owner. */
  PROXYFLEET_POD_UID: z.string().min(1).optional(),
  PROXYFLEET_LEADER_ELECTION: bool(true),
  /** Reconcile ProxyGateways and ApiKeys of these namespaces only (comma-separated); unset: every namespace. */
  PROXYFLEET_WATCH_NAMESPACE: z
    .string()
    .optional()
    .transform((v) =>
      (v ?? '')
        .split(',')
        .map((n) => n.trim())
        .filter((n) => n !== ''),
    )
    .pipe(z.array(z.string().regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be namespace names'))),
  PROXYFLEET_RESYNC_SECONDS: positiveInt(300),
  /** The image gateway pods run (the one proxyfleet image). */
  PROXYFLEET_GATEWAY_IMAGE: z.string().min(1).default('ghcr.io/proxyfleet/proxyfleet:0.1.0'),
  PROXYFLEET_GATEWAY_IMAGE_PULL_POLICY: z.enum(['Always', 'IfNotPresent', 'Never']).default('IfNotPresent'),
  /** Secret (in each ProxyGateway's namespace) and key holding the gateways' DATABASE_URL. */
  PROXYFLEET_GATEWAY_DATABASE_SECRET: z.string().min(1).default('proxyfleet-database'),
  PROXYFLEET_GATEWAY_DATABASE_SECRET_KEY: z.string().min(1).default('url'),
  /** The key of the gateways' session URL in that Secret (PROXYFLEET_DATABASE_SESSION_URL; docs/adr/0068). */
  PROXYFLEET_GATEWAY_DATABASE_SESSION_SECRET_KEY: z.string().min(1).optional(),
  /** `transaction`: the gateways' DATABASE_URL is a transaction-mode pooler (PROXYFLEET_DB_POOLING). */
  PROXYFLEET_GATEWAY_DB_POOLING: z.enum(['session', 'transaction']).default('session'),
  /**
   * Log level of the gateway pods, apart from the controller's own PROXYFLEET_LOG_LEVEL: turning
   * the controller's logging up must not roll the whole fleet.
   */
  PROXYFLEET_GATEWAY_LOG_LEVEL: logLevel,
  /** The gateway pods' PROXYFLEET_RELAY_URL (docs/adr/0105); unset: each LISTENs itself. */
  PROXYFLEET_GATEWAY_RELAY_URL: relayUrlEnv.PROXYFLEET_RELAY_URL,
  /**
   * The gateway pods' PROXYFLEET_GATEWAY_ALLOW_CIDRS: ranges exempt from their destination guard
   * (an origin inside the cluster's own network, as the e2e tests use; default none).
   */
  PROXYFLEET_GATEWAY_ALLOW_CIDRS: cidrList,
  /**
   * The gateways' NetworkPolicy, as JSON (proxygateway/network-policy.ts; the chart renders it from
   * controller.gatewayNetworkPolicy and networkPolicy): unset or empty, none is written and the
   * operator removes the ones it wrote.
   */
  PROXYFLEET_GATEWAY_NETWORK_POLICY: gatewayNetworkPolicyEnv,
  /** The v1alpha1 <-> v1beta1 conversion webhook (docs/adr/0121); false only where no API server calls it. */
  PROXYFLEET_WEBHOOK_ENABLED: bool(true),
  PROXYFLEET_WEBHOOK_HOST: z.string().default('0.0.0.0'),
  PROXYFLEET_WEBHOOK_PORT: port(9443),
  /** self: the controller makes, rotates and publishes the certificate; cert-manager: it serves cert-manager's. */
  PROXYFLEET_WEBHOOK_CERTIFICATES: z.enum(['self', 'cert-manager']).default('self'),
  /** The Secret (in PROXYFLEET_NAMESPACE) holding the webhook's certificate. */
  PROXYFLEET_WEBHOOK_SECRET: z.string().min(1).default('proxyfleet-controller-webhook'),
  /** The webhook's Service: the certificate names <service>.<namespace>.svc. */
  PROXYFLEET_WEBHOOK_SERVICE: z.string().min(1).default('proxyfleet-controller-webhook'),
};

export const controllerSchema = z.object({ ...baseEnv, ...controllerEnv });
export const loadControllerConfig = (env?: Env) => parseConfig(controllerSchema, env);
