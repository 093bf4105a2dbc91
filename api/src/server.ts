// Starts the API's HTTP server on its port; used by the api entrypoint and by dev.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Health } from '../../common/src/health.ts';
import type { Logger } from '../../common/src/logger.ts';
import type { Pool } from '../../common/src/db/pool.ts';
import type { Registry } from 'prom-client';
import type { ApiConfig } from './config.ts';
import { createApp } from './app.ts';

export interface ApiDeps {
  config: Readonly<ApiConfig>;
  logger: Logger;
  registry: Registry;
  health: Health;
  pool: Pool;
  databaseUrl: string;
}

export interface RunningApi {
  port: number;
  close(): Promise<void>;
}

export async function startApi(deps: ApiDeps): Promise<RunningApi> {
  const app = createApp({ health: deps.health });
  const server = http.createServer(app);
  server.keepAliveTimeout = 65_000; // above common load balancers' idle timeout (60 s)
  server.on('clientError', (_err, socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(deps.config.PROXYFLEET_API_PORT, deps.config.PROXYFLEET_API_HOST, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  deps.logger.info({ port }, 'api listening');
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), 5_000).unref();
      }),
  };
}
