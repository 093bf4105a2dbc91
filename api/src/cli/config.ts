// The CLI's configuration: where the admin API is and its token. Flags win over the environment;
// without either, the token of a local `npm start` is read from <data dir>/admin-token.
import { z } from 'zod';
import { parseConfig, type Env } from '../../../common/src/config.ts';

export const cliSchema = z.object({
  PROXYFLEET_API_URL: z.string().url().default('http://127.0.0.1:8080'),
  PROXYFLEET_ADMIN_TOKEN: z.string().min(1).optional(),
  PROXYFLEET_DATA_DIR: z.string().min(1).default('./.proxyfleet'),
});
export const loadCliConfig = (env?: Env) => parseConfig(cliSchema, env);
