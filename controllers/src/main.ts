// Composition root of the controller entrypoint.
import { startHealthServer } from '../../common/src/health.ts';
import { closeOnShutdown, openDatabase } from '../../common/src/db/open.ts';
import { runMain } from '../../common/src/runtime.ts';
import { loadControllerConfig } from './config.ts';

runMain('controller', loadControllerConfig, async (config, { logger, registry, health, shutdown }) => {
  const db = await openDatabase({
    databaseUrl: config.DATABASE_URL,
    dataDir: config.PROXYFLEET_DATA_DIR,
    poolSize: config.PROXYFLEET_DB_POOL_SIZE,
    component: 'controller',
    logger,
    registry,
  });
  const server = await startHealthServer(health, config.PROXYFLEET_HEALTH_HOST, config.PROXYFLEET_HEALTH_PORT);
  shutdown.add({ name: 'health', run: () => server.close() });
  closeOnShutdown(db, shutdown);
});
