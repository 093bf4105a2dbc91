import { z } from 'zod';
import { baseEnv, parseConfig, port, type Env } from '../../common/src/config.ts';

export const workerEnv = {
  PROXYFLEET_HEALTH_PORT: port(9091),
};

export const workerSchema = z.object({ ...baseEnv, ...workerEnv });
export type WorkerConfig = z.infer<typeof workerSchema>;
export const loadWorkerConfig = (env?: Env) => parseConfig(workerSchema, env);
