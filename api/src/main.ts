// Composition root of the api entrypoint.
import { openEntrypointDatabase } from '#common/db/open.ts';
import { runMain } from '#common/runtime.ts';
import { loadApiConfig } from './config.ts';
import { startApi } from './server.ts';

runMain('api', loadApiConfig, async (config, runtime) => {
  const { logger, registry, health, shutdown } = runtime;
  const db = await openEntrypointDatabase('api', config, runtime);
  const api = await startApi({ config, logger, registry, health, pool: db.pool, databaseUrl: db.sessionUrl });
  shutdown.add({ name: 'http', run: () => api.close() });
});
