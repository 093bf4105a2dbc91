// Composition root of the api entrypoint.
import { closeOnShutdown, openDatabase } from '../../common/src/db/open.ts';
import { runMain } from '../../common/src/runtime.ts';
import { loadApiConfig } from './config.ts';
import { startApi } from './server.ts';

runMain('api', loadApiConfig, async (config, { logger, registry, health, shutdown }) => {
  const db = await openDatabase({
    databaseUrl: config.DATABASE_URL,
    dataDir: config.PROXYFLEET_DATA_DIR,
    poolSize: config.PROXYFLEET_DB_POOL_SIZE,
    component: 'api',
    logger,
    registry,
  });
  health.addCheck('database', async () => void (await db.pool.query('SELECT 1')));
  const api = await startApi({ config, logger, registry, health, pool: db.pool, databaseUrl: db.url });
  shutdown.add({ name: 'http', run: () => api.close() });
  closeOnShutdown(db, shutdown);
});
