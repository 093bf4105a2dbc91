import { z } from 'zod';
import { baseEnv, parseConfig, port, type Env } from '../../common/src/config.ts';

export const controllerEnv = {
  PROXYFLEET_HEALTH_PORT: port(9092),
  /** Path to a kubeconfig; unset: in-cluster service account, then ~/.kube/config. */
  KUBECONFIG: z.string().optional(),
  /** Namespace of the Lease used for leader election (the pod's namespace in a cluster). */
  PROXYFLEET_NAMESPACE: z.string().min(1).default('proxyfleet'),
};

export const controllerSchema = z.object({ ...baseEnv, ...controllerEnv });
export type ControllerConfig = z.infer<typeof controllerSchema>;
export const loadControllerConfig = (env?: Env) => parseConfig(controllerSchema, env);
