// Composition root of the api entrypoint.
import { openEntrypointDatabase } from '#common/db/open.ts';
import { startHealthServer } from '#common/health.ts';
import { drainOnPreStop } from '#common/prestop.ts';
import { runMain } from '#common/runtime.ts';
import { loadApiConfig } from './config.ts';
import { startApi } from './server.ts';

runMain('api', loadApiConfig, async (config, runtime) => {
  const { logger, registry, health, shutdown } = runtime;
  const db = await openEntrypointDatabase('api', config, runtime);
  const api = await startApi({ config, logger, registry, health, pool: db.pool, databaseUrl: db.sessionUrl });
  // The pod's preStop, on a port of its own (not the public one): readiness false, then accept
  // until no new connection comes, as the gateway does (common/src/prestop.ts, docs/adr/0094).
  if (config.PROXYFLEET_HEALTH_PORT !== undefined) {
    drainOnPreStop(health, () => api.lastConnectionAt(), logger);
    const server = await startHealthServer(
      health,
      config.PROXYFLEET_HEALTH_HOST,
      config.PROXYFLEET_HEALTH_PORT,
    );
    shutdown.add({ name: 'health', run: () => server.close() });
  }
  shutdown.add({ name: 'http', run: () => api.close() });
});
