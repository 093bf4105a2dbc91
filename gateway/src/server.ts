// One gateway: a forward proxy for one ProxyGateway (one plan) on the plan's port.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import type { Health } from '../../common/src/health.ts';
import type { Logger } from '../../common/src/logger.ts';
import type { Pool } from '../../common/src/db/pool.ts';
import type { ProxyGateway } from './spec.ts';

export interface GatewayDeps {
  gateway: ProxyGateway;
  /** Overrides spec.port (tests listen on port 0). */
  port?: number;
  host: string;
  gatewayId: string;
  allowCidrs: readonly string[];
  pool: Pool;
  databaseUrl: string;
  logger: Logger;
  registry: Registry;
  health: Health;
}

export interface RunningGateway {
  port: number;
  close(): Promise<void>;
}

export async function startGateway(deps: GatewayDeps): Promise<RunningGateway> {
  const server = http.createServer((_req, res) => {
    res.writeHead(503, { 'proxy-status': 'proxyfleet; error=proxy_internal_error; details="not ready"' });
    res.end();
  });
  server.on('clientError', (_err, socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(deps.port ?? deps.gateway.spec.port, deps.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  deps.logger.info({ plan: deps.gateway.spec.plan, port }, 'gateway listening');
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
