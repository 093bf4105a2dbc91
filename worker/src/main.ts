// Composition root of the worker entrypoint.
import { startHealthServer } from '#common/health.ts';
import { openEntrypointDatabase } from '#common/db/open.ts';
import { runMain } from '#common/runtime.ts';
import { paymentMethods } from '#common/billing/payment.ts';
import { cardMethod, stripeClient } from '#common/billing/stripe.ts';
import { allJobs } from './all-jobs.ts';
import { loadWorkerConfig } from './config.ts';
import { registerOutboxMetrics } from './outbox-metrics.ts';
import { startWorker } from './server.ts';

runMain('worker', loadWorkerConfig, async (config, runtime) => {
  const { logger, registry, health, shutdown } = runtime;
  const db = await openEntrypointDatabase('worker', config, runtime);
  const stripe = stripeClient(config);
  const jobs = allJobs({
    config,
    credentialsKey: config.PROXYFLEET_CREDENTIALS_KEY,
    logger,
    registry,
    ...(stripe ? { payments: paymentMethods(cardMethod(db.pool, stripe)) } : {}),
  });
  registerOutboxMetrics(registry, db.pool);
  const worker = startWorker({ pool: db.pool, databaseUrl: db.sessionUrl, logger, registry, health, jobs });
  const server = await startHealthServer(
    health,
    config.PROXYFLEET_HEALTH_HOST,
    config.PROXYFLEET_HEALTH_PORT,
  );
  logger.info({ port: server.port }, 'worker health server listening');
  shutdown.add({ name: 'worker', run: () => worker.close() });
  shutdown.add({ name: 'health', run: () => server.close() });
});
