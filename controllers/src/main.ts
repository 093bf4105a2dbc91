// Composition root of the controller entrypoint: database, kube client, the operator (leader
// election, then the ProxyGateway and ApiKey controllers), health and metrics.
import { startHealthServer } from '#common/health.ts';
import { openEntrypointDatabase } from '#common/db/open.ts';
import { runMain } from '#common/runtime.ts';
import { SHUTDOWN_ORDER } from '#common/shutdown.ts';
import { loadControllerConfig } from './config.ts';
import { startWebhook } from './conversion/run.ts';
import { LEASE_NAME, Operator } from './operator.ts';
import { createKubeClient, loadKubeConfig } from './runtime/kube.ts';
import { restClientMetrics } from './runtime/metrics.ts';

runMain('controller', loadControllerConfig, async (config, runtime) => {
  const { logger, registry, health, shutdown } = runtime;
  const db = await openEntrypointDatabase('controller', config, runtime);
  const client = createKubeClient(loadKubeConfig(config.KUBECONFIG), {
    onResponse: restClientMetrics(registry),
  });
  const operator = new Operator({
    client,
    pool: db.pool,
    logger,
    registry,
    operatorNamespace: config.PROXYFLEET_NAMESPACE,
    watchNamespaces: config.PROXYFLEET_WATCH_NAMESPACE,
    resyncMs: config.PROXYFLEET_RESYNC_SECONDS * 1000,
    gateway: {
      image: config.PROXYFLEET_GATEWAY_IMAGE,
      imagePullPolicy: config.PROXYFLEET_GATEWAY_IMAGE_PULL_POLICY,
      databaseSecret: {
        name: config.PROXYFLEET_GATEWAY_DATABASE_SECRET,
        key: config.PROXYFLEET_GATEWAY_DATABASE_SECRET_KEY,
        ...(config.PROXYFLEET_GATEWAY_DATABASE_SESSION_SECRET_KEY
          ? { sessionKey: config.PROXYFLEET_GATEWAY_DATABASE_SESSION_SECRET_KEY }
          : {}),
      },
      dbPooling: config.PROXYFLEET_GATEWAY_DB_POOLING,
      relayUrl: config.PROXYFLEET_GATEWAY_RELAY_URL,
      logLevel: config.PROXYFLEET_GATEWAY_LOG_LEVEL,
      allowCidrs: config.PROXYFLEET_GATEWAY_ALLOW_CIDRS,
      networkPolicy: config.PROXYFLEET_GATEWAY_NETWORK_POLICY,
    },
    leaderElection: config.PROXYFLEET_LEADER_ELECTION
      ? {
          namespace: config.PROXYFLEET_NAMESPACE,
          name: LEASE_NAME,
          identity: config.PROXYFLEET_POD_NAME,
          ...(config.PROXYFLEET_POD_UID
            ? {
                owner: {
                  apiVersion: 'v1' as const,
                  kind: 'Pod' as const,
                  name: config.PROXYFLEET_POD_NAME,
                  uid: config.PROXYFLEET_POD_UID,
                },
              }
            : {}),
        }
      : false,
    // A replica that lost the Lease exits and restarts clean rather than risk two leaders.
    onLeadershipLost: () => void shutdown.run('leadership lost').then(() => process.exit(1)),
  });
  health.addInfo('leader', () => operator.leading);
  shutdown.add({ name: 'operator', run: () => operator.stop(), order: SHUTDOWN_ORDER.DEFAULT });
  const server = await startHealthServer(
    health,
    config.PROXYFLEET_HEALTH_HOST,
    config.PROXYFLEET_HEALTH_PORT,
  );
  shutdown.add({ name: 'health', run: () => server.close() });
  // Before the operator: every replica serves conversions, the leader or not.
  if (config.PROXYFLEET_WEBHOOK_ENABLED) {
    const webhook = await startWebhook({
      client,
      logger,
      registry,
      namespace: config.PROXYFLEET_NAMESPACE,
      secretName: config.PROXYFLEET_WEBHOOK_SECRET,
      serviceName: config.PROXYFLEET_WEBHOOK_SERVICE,
      mode: config.PROXYFLEET_WEBHOOK_CERTIFICATES,
      port: config.PROXYFLEET_WEBHOOK_PORT,
      host: config.PROXYFLEET_WEBHOOK_HOST,
    });
    shutdown.add({ name: 'conversion webhook', run: () => webhook.stop() });
  }
  await operator.start();
  logger.info(
    { identity: config.PROXYFLEET_POD_NAME, leaderElection: config.PROXYFLEET_LEADER_ELECTION },
    'controller started',
  );
});
