import { z } from 'zod';
import { baseEnv, encryptionKey, parseConfig, port, positiveInt, type Env } from '../../common/src/config.ts';

export const apiEnv = {
  PROXYFLEET_API_HOST: z.string().default('0.0.0.0'),
  PROXYFLEET_API_PORT: port(8080),
  /** Operators' bearer token for /admin/v1. No default: a secret. */
  PROXYFLEET_ADMIN_TOKEN: z.string().min(24, 'must be at least 24 characters'),
  /** Encrypts proxy passwords at rest (32 bytes, hex or base64). No default: a secret. */
  PROXYFLEET_CREDENTIALS_KEY: encryptionKey,
  PROXYFLEET_USAGE_REFRESH_SECONDS: positiveInt(30),
};

export const apiSchema = z.object({ ...baseEnv, ...apiEnv });
export type ApiConfig = z.infer<typeof apiSchema>;

export const loadApiConfig = (env?: Env) => parseConfig(apiSchema, env);
