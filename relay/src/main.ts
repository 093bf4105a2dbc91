// Composition root of the change relay (docs/adr/0105).
import { startHealthServer } from '#common/health.ts';
import { openEntrypointDatabase } from '#common/db/open.ts';
import { runMain } from '#common/runtime.ts';
import { loadRelayConfig } from './config.ts';
import { ChangeRelay } from './relay.ts';

runMain('relay', loadRelayConfig, async (config, runtime) => {
  const { logger, registry, health, shutdown } = runtime;
  const db = await openEntrypointDatabase('relay', config, runtime);
  const relay = new ChangeRelay({
    pool: db.pool,
    databaseUrl: db.sessionUrl,
    logger,
    registry,
    keep: config.PROXYFLEET_RELAY_KEEP,
  });
  await relay.start();
  const stream = await relay.listen(config.PROXYFLEET_RELAY_HOST, config.PROXYFLEET_RELAY_PORT);
  health.addInfo('cacheVersion', () => relay.version);
  health.addInfo('relayClients', () => relay.clientCount);
  const server = await startHealthServer(
    health,
    config.PROXYFLEET_HEALTH_HOST,
    config.PROXYFLEET_HEALTH_PORT,
  );
  logger.info({ port: stream.port, health: server.port }, 'change relay listening');
  shutdown.add({ name: 'relay', run: () => stream.close().then(() => relay.close()) });
  shutdown.add({ name: 'health', run: () => server.close() });
});
