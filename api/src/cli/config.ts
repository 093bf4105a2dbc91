// The CLI's configuration: where the admin API is and its token, read from the same variables
// `npm start` reads (PROXYFLEET_API_HOST, PROXYFLEET_API_PORT, PROXYFLEET_DATA_DIR), or
// PROXYFLEET_API_URL for a remote API. Flags win over the environment; without a token, the one
// a local `npm start` keeps in <data dir>/admin-token is read.
import { z } from 'zod';
import { parseConfig, port, type Env } from '#common/config.ts';

export const cliSchema = z.object({
  PROXYFLEET_API_URL: z.string().url().optional(),
  PROXYFLEET_API_HOST: z.string().min(1).default('127.0.0.1'),
  PROXYFLEET_API_PORT: port(8080),
  PROXYFLEET_ADMIN_TOKEN: z.string().min(1).optional(),
  PROXYFLEET_DATA_DIR: z.string().min(1).default('./.proxyfleet'),
});
export const loadCliConfig = (env?: Env) => parseConfig(cliSchema, env);

/** The API's base URL: PROXYFLEET_API_URL, else the host and port `npm start` listens on. */
export function apiUrl(config: z.infer<typeof cliSchema>): string {
  if (config.PROXYFLEET_API_URL) return config.PROXYFLEET_API_URL;
  // A server listening on every address is reached on loopback.
  const host = ['0.0.0.0', '::', ''].includes(config.PROXYFLEET_API_HOST)
    ? '127.0.0.1'
    : config.PROXYFLEET_API_HOST;
  return `http://${host.includes(':') ? `[${host}]` : host}:${config.PROXYFLEET_API_PORT}`;
}
