import { hostname } from 'node:os';
import { z } from 'zod';
import { baseEnv, bool, parseConfig, port, positiveInt, type Env } from '../../common/src/config.ts';

export const controllerEnv = {
  PROXYFLEET_HEALTH_PORT: port(9092),
  /** Path to a kubeconfig; unset: in-cluster service account, then ~/.kube/config. */
  KUBECONFIG: z.string().optional(),
  /** Namespace of the Lease used for leader election (the pod's namespace in a cluster). */
  PROXYFLEET_NAMESPACE: z.string().min(1).default('proxyfleet'),
  /** This instance's identity in the Lease: the pod name (downward API) in a cluster. */
  PROXYFLEET_POD_NAME: z.string().min(1).default(hostname()),
  PROXYFLEET_LEADER_ELECTION: bool(true),
  /** Reconcile ProxyGateways and ApiKeys of this namespace only; unset: every namespace. */
  PROXYFLEET_WATCH_NAMESPACE: z.string().min(1).optional(),
  PROXYFLEET_RESYNC_SECONDS: positiveInt(300),
  /** The image gateway pods run (the one proxyfleet image). */
  PROXYFLEET_GATEWAY_IMAGE: z.string().min(1).default('ghcr.io/proxyfleet/proxyfleet:0.1.0'),
  PROXYFLEET_GATEWAY_IMAGE_PULL_POLICY: z.enum(['Always', 'IfNotPresent', 'Never']).default('IfNotPresent'),
  /** Secret (in each ProxyGateway's namespace) and key holding the gateways' DATABASE_URL. */
  PROXYFLEET_GATEWAY_DATABASE_SECRET: z.string().min(1).default('proxyfleet-database'),
  PROXYFLEET_GATEWAY_DATABASE_SECRET_KEY: z.string().min(1).default('url'),
};

export const controllerSchema = z.object({ ...baseEnv, ...controllerEnv });
export const loadControllerConfig = (env?: Env) => parseConfig(controllerSchema, env);
