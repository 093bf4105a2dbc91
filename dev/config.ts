import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import {
  baseEnv,
  cidrList,
  encryptionKey,
  parseConfig,
  port,
  relayUrlEnv,
  type Env,
} from '#common/config.ts';
import { apiTuningEnv } from '#api/config.ts';
import { gatewayEnv, proxyProtocolEnv, proxyProtocolNeedsTrust } from '../gateway/src/config.ts';
import { auditEnv, emailEnv } from '../worker/src/config.ts';

// `npm start`: everything in one process. The secrets that production requires are optional
// here: unset, they are generated once and kept in the data directory.
export const devSchema = z
  .object({
    ...baseEnv,
    ...relayUrlEnv,
    PROXYFLEET_API_HOST: z.string().default('127.0.0.1'),
    PROXYFLEET_API_PORT: port(8080),
    PROXYFLEET_ADMIN_TOKEN: z.string().min(24, 'must be at least 24 characters').optional(),
    PROXYFLEET_CREDENTIALS_KEY: encryptionKey.optional(),
    ...apiTuningEnv,
    PROXYFLEET_GATEWAY_ALLOW_CIDRS: cidrList,
    PROXYFLEET_GATEWAY_HOST: z.string().default('127.0.0.1'),
    PROXYFLEET_DEV_GATEWAYS: z.string().default('dev/gateways.yaml'),
    /** Set to false to run without gateways (the API and worker only). */
    PROXYFLEET_DEV_START_GATEWAYS: z
      .enum(['true', 'false'])
      .default('true')
      .transform((v) => v === 'true'),
    /** As the gateway's: every dev gateway serves TLS on its port with this pair (docs/adr/0083). */
    PROXYFLEET_GATEWAY_TLS_CERT: gatewayEnv.PROXYFLEET_GATEWAY_TLS_CERT,
    PROXYFLEET_GATEWAY_TLS_KEY: gatewayEnv.PROXYFLEET_GATEWAY_TLS_KEY,
    PROXYFLEET_GATEWAY_TLS_RELOAD_SECONDS: gatewayEnv.PROXYFLEET_GATEWAY_TLS_RELOAD_SECONDS,
    /** As the gateway's: the PROXY protocol on every dev gateway's port (docs/adr/0102). */
    ...proxyProtocolEnv,
    ...emailEnv,
    ...auditEnv,
    /** scripts/install-tools.sh's bin dir: stripe-mock from there runs as Stripe when no Stripe key is set. */
    PROXYFLEET_TOOLS_BIN: z.string().min(1).default(path.join(os.homedir(), '.cache/proxyfleet/tools/bin')),
  })
  .refine(
    (c) => (c.PROXYFLEET_GATEWAY_TLS_CERT === undefined) === (c.PROXYFLEET_GATEWAY_TLS_KEY === undefined),
    {
      message: 'set both PROXYFLEET_GATEWAY_TLS_CERT and PROXYFLEET_GATEWAY_TLS_KEY, or neither',
      path: ['PROXYFLEET_GATEWAY_TLS_KEY'],
    },
  )
  .refine(...proxyProtocolNeedsTrust);
export const loadDevConfig = (env?: Env) => parseConfig(devSchema, env);
