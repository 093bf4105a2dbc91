import { z } from 'zod';
import { baseEnv, parseConfig, port, positiveInt, type Env } from '#common/config.ts';

export const relayEnv = {
  PROXYFLEET_RELAY_HOST: z.string().default('0.0.0.0'),
  /** The stream's port: `ws://<host>:<port>/changes` (PROXYFLEET_RELAY_URL of the processes). */
  PROXYFLEET_RELAY_PORT: port(8095),
  PROXYFLEET_HEALTH_PORT: port(9093),
  /** Changes kept in memory: a process that was away for fewer resumes, more re-snapshots. */
  PROXYFLEET_RELAY_KEEP: positiveInt(10_000),
};

export const relaySchema = z.object({ ...baseEnv, ...relayEnv });
export const loadRelayConfig = (env?: Env) => parseConfig(relaySchema, env);
