// Composition root of the gateway entrypoint: one ProxyGateway per process.
import { hostname } from 'node:os';
import { startHealthServer } from '#common/health.ts';
import { openEntrypointDatabase } from '#common/db/open.ts';
import { runMain } from '#common/runtime.ts';
import { GatewayHeartbeat } from './accounting/heartbeat.ts';
import { loadGatewayConfig } from './config.ts';
import { raiseFileLimit } from './proxy/limits.ts';
import { drainOnPreStop } from '#common/prestop.ts';
import { startGateway } from './server.ts';
import { GatewayCertificates } from './tls/certificates.ts';
import { readProxyGateways, withProxyProtocolEnv } from './spec.ts';

runMain('gateway', loadGatewayConfig, async (config, runtime) => {
  const { logger, registry, health, shutdown } = runtime;
  const [read, ...rest] = await readProxyGateways(config.PROXYFLEET_GATEWAY_CONFIG);
  if (!read || rest.length)
    throw new Error(`${config.PROXYFLEET_GATEWAY_CONFIG} must hold exactly one ProxyGateway`);
  const gateway = withProxyProtocolEnv(read, config);
  // The connection cap is sized from the fd limit: raise the soft limit to the hard one first.
  const fdLimit = raiseFileLimit((message) =>
    logger.warn({ err: message }, 'could not raise the open-file limit (prlimit)'),
  );
  logger.info({ fdLimit }, 'open-file limit');
  const db = await openEntrypointDatabase('gateway', config, runtime, { readinessCheck: false });
  const gatewayId = config.PROXYFLEET_GATEWAY_ID ?? hostname();
  // Before the first lease: a crashed gateway's leases are reclaimed once its heartbeat is 30 s
  // old, and registering returns what an earlier process of this id left open (docs/adr/0025).
  const heartbeat = await GatewayHeartbeat.start({
    pool: db.pool,
    gatewayId,
    plan: gateway.spec.plan,
    logger,
    registry,
  });
  health.addInfo('liveGateways', () => heartbeat.liveGateways());
  const tls =
    config.PROXYFLEET_GATEWAY_TLS_CERT && config.PROXYFLEET_GATEWAY_TLS_KEY
      ? await GatewayCertificates.open({
          certFile: config.PROXYFLEET_GATEWAY_TLS_CERT,
          keyFile: config.PROXYFLEET_GATEWAY_TLS_KEY,
          reloadMs: config.PROXYFLEET_GATEWAY_TLS_RELOAD_SECONDS * 1000,
          logger,
          registry,
        })
      : undefined;
  const running = await startGateway({
    gateway,
    host: config.PROXYFLEET_GATEWAY_HOST,
    ...(config.PROXYFLEET_GATEWAY_PORT !== undefined ? { port: config.PROXYFLEET_GATEWAY_PORT } : {}),
    gatewayId,
    fleetSize: () => heartbeat.liveGateways(),
    flushMs: config.PROXYFLEET_GATEWAY_FLUSH_SECONDS * 1000,
    allowCidrs: config.PROXYFLEET_GATEWAY_ALLOW_CIDRS,
    pool: db.pool,
    databaseUrl: db.sessionUrl,
    relayUrl: config.PROXYFLEET_RELAY_URL,
    logger,
    registry,
    health,
    // Keep a few seconds of the grace period for the final usage flush.
    drainMs: Math.max(1, config.PROXYFLEET_SHUTDOWN_GRACE_SECONDS - 7) * 1000,
    bare: config.PROXYFLEET_GATEWAY_FEATURES === 'bare',
    accessLogSample: config.PROXYFLEET_GATEWAY_ACCESS_LOG_SAMPLE,
    connectFastPath: config.PROXYFLEET_GATEWAY_CONNECT_FAST_PATH === 'on',
    ...(tls ? { tls } : {}),
    limits: {
      ...(config.PROXYFLEET_GATEWAY_MAX_CONNECTIONS !== undefined
        ? { maxConnections: config.PROXYFLEET_GATEWAY_MAX_CONNECTIONS }
        : {}),
      maxUnauthenticatedPerSource: config.PROXYFLEET_GATEWAY_MAX_UNAUTHENTICATED_PER_SOURCE,
      authFailuresPerAddress: config.PROXYFLEET_GATEWAY_AUTH_FAILURES_PER_MINUTE,
    },
  });
  // The exits' health rides on the heartbeat (docs/adr/0117).
  heartbeat.reportExits(() => running.exitReport());
  const server = await startHealthServer(
    health,
    config.PROXYFLEET_HEALTH_HOST,
    config.PROXYFLEET_HEALTH_PORT,
  );
  // The pod's preStop: readiness false, then accept until no new connection comes (prestop.ts).
  drainOnPreStop(health, () => running.lastConnectionAt(), logger);
  shutdown.add({ name: 'gateway', run: () => running.close() });
  if (tls) shutdown.add({ name: 'tls-certificates', run: () => tls.close() });
  // After the final flush returned the leases: the row goes, the gateway counts as gone at once.
  shutdown.add({ name: 'heartbeat', run: () => heartbeat.stop() });
  shutdown.add({ name: 'health', run: () => server.close() });
});
