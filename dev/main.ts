// `npm start`: the whole platform in one process on the embedded database (unless DATABASE_URL
// is set): the API on 127.0.0.1:8080, the worker, the change relay (the API and the gateways take
// their changes from it, unless PROXYFLEET_RELAY_URL names another), and one gateway per ProxyGateway in
// dev/gateways.yaml (with PROXYFLEET_GATEWAY_TLS_CERT/_KEY, each serves TLS on its port too and
// its endpoint says so: docs/adr/0083). No Kubernetes: the controller is not part of dev.
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { openEntrypointDatabase } from '#common/db/open.ts';
import { runMain } from '#common/runtime.ts';
import { exitWhenParentExits } from '#common/shutdown.ts';
import { readOrCreateSecretFile } from '#common/secret-file.ts';
import { exitLocations, upsertGatewayEndpoint } from '#common/gateway-endpoints.ts';
import { startApi } from '#api/server.ts';
import { WEBHOOK_PATH } from '#api/modules/cards/webhook.ts';
import { GatewayProcess, startGateway, type RunningGateway } from '../gateway/src/server.ts';
import { readProxyGateways, withProxyProtocolEnv } from '../gateway/src/spec.ts';
import { allJobs } from '../worker/src/all-jobs.ts';
import { registerOutboxMetrics } from '../worker/src/outbox-metrics.ts';
import { startWorker } from '../worker/src/server.ts';
import { ChangeRelay } from '../relay/src/relay.ts';
import { GatewayCertificates } from '../gateway/src/tls/certificates.ts';
import { loadDevConfig } from './config.ts';
import { startMailSink } from './mail-sink.ts';
import { startStripeMock, stripeMockBinary } from './stripe-mock.ts';
import { startStripeStandIn } from './stripe-checkout.ts';
import { paymentMethods } from '#common/billing/payment.ts';
import { cardMethod, stripeClient } from '#common/billing/stripe.ts';

runMain('dev', loadDevConfig, async (config, runtime) => {
  const { logger, registry, health, shutdown } = runtime;
  const dataDir = path.resolve(config.PROXYFLEET_DATA_DIR);
  // `npm start`'s npm may die alone (SIGTERM to npm, a closed terminal): stop with it.
  exitWhenParentExits(shutdown, logger);

  const adminToken =
    config.PROXYFLEET_ADMIN_TOKEN ??
    (await (async () => {
      const file = path.join(dataDir, 'admin-token');
      const { value, created } = await readOrCreateSecretFile(file, () => randomBytes(24).toString('hex'));
      // Printed on purpose: this is how a developer learns the token of their local platform.
      process.stdout.write(`admin token (${created ? 'new' : 'kept'}, in ${file}): ${value}\n`);
      return value;
    })());
  const credentialsKey =
    config.PROXYFLEET_CREDENTIALS_KEY ??
    Buffer.from(
      (
        await readOrCreateSecretFile(path.join(dataDir, 'credentials-key'), () =>
          randomBytes(32).toString('hex'),
        )
      ).value,
      'hex',
    );

  const db = await openEntrypointDatabase('dev', { ...config, PROXYFLEET_DATA_DIR: dataDir }, runtime);

  // No SMTP configured: a local sink keeps every email as a file (`npx proxyfleet mail list`).
  const mailSink = config.PROXYFLEET_SMTP_URL ? undefined : await startMailSink(path.join(dataDir, 'mail'));
  if (mailSink) process.stdout.write(`emails are kept in ${mailSink.dir} (npx proxyfleet mail list)\n`);
  // No Stripe key and stripe-mock built: card payments go to stripe-mock, through the stand-in for
  // what it lacks (dev/stripe-checkout.ts: the hosted pages, ids of their own, the webhooks).
  const mockBinary = config.PROXYFLEET_STRIPE_SECRET_KEY
    ? null
    : stripeMockBinary(config.PROXYFLEET_TOOLS_BIN);
  const stripeMock = mockBinary ? await startStripeMock(mockBinary) : undefined;
  if (stripeMock) shutdown.add({ name: 'stripe-mock', run: () => stripeMock.close(), order: 20 });
  const webhookSecret = config.PROXYFLEET_STRIPE_WEBHOOK_SECRET ?? 'whsec_dev';
  const standIn = stripeMock
    ? await startStripeStandIn({
        mockUrl: stripeMock.url,
        webhookSecret,
        logger: logger.child({ process: 'stripe-mock' }),
      })
    : undefined;
  if (standIn) shutdown.add({ name: 'stripe-mock stand-in', run: () => standIn.close(), order: 10 });
  const stripeConfig = standIn
    ? {
        PROXYFLEET_STRIPE_SECRET_KEY: 'sk_test_dev',
        PROXYFLEET_STRIPE_WEBHOOK_SECRET: webhookSecret,
        PROXYFLEET_STRIPE_API_BASE: standIn.url,
      }
    : {};
  if (standIn)
    process.stdout.write(
      `card payments go to stripe-mock (${stripeMock!.url}) through its stand-in at ${standIn.url}: save a test card on the Billing page\n`,
    );
  const stripe = stripeClient({ ...config, ...stripeConfig });
  const jobs = allJobs({
    config: { ...config, PROXYFLEET_SMTP_URL: config.PROXYFLEET_SMTP_URL ?? mailSink?.url },
    credentialsKey,
    logger,
    registry,
    ...(stripe ? { payments: paymentMethods(cardMethod(db.pool, stripe)) } : {}),
  });
  // The worker's scrape-time gauges as in worker/src/main.ts: this /metrics is the worker's too.
  registerOutboxMetrics(registry, db.pool);
  const worker = startWorker({ pool: db.pool, databaseUrl: db.sessionUrl, logger, registry, health, jobs });

  // The change relay on an ephemeral local port, as the chart runs it beside the pods.
  let relayUrl = config.PROXYFLEET_RELAY_URL;
  if (!relayUrl) {
    const relay = new ChangeRelay({
      pool: db.pool,
      databaseUrl: db.sessionUrl,
      logger: logger.child({ process: 'relay' }),
      registry,
    });
    await relay.start();
    const stream = await relay.listen('127.0.0.1', 0);
    relayUrl = `ws://127.0.0.1:${stream.port}/changes`;
    // After the API and the gateways, whose streams it serves.
    shutdown.add({ name: 'relay', run: () => stream.close().then(() => relay.close()), order: 10 });
  }

  const gateways = config.PROXYFLEET_DEV_START_GATEWAYS
    ? (await readProxyGateways(config.PROXYFLEET_DEV_GATEWAYS)).map((g) => withProxyProtocolEnv(g, config))
    : [];
  const runningGateways: RunningGateway[] = [];
  // One shared state (credential cache, change feed, metrics, connection caps) for all gateways.
  const gatewayProcess = gateways.length
    ? await GatewayProcess.open({
        pool: db.pool,
        databaseUrl: db.sessionUrl,
        relayUrl,
        logger,
        registry,
        health,
        gatewayId: 'dev',
      })
    : undefined;
  // One certificate pair for every dev gateway, reloaded on change as a gateway pod's is.
  const tls =
    gateways.length && config.PROXYFLEET_GATEWAY_TLS_CERT && config.PROXYFLEET_GATEWAY_TLS_KEY
      ? await GatewayCertificates.open({
          certFile: config.PROXYFLEET_GATEWAY_TLS_CERT,
          keyFile: config.PROXYFLEET_GATEWAY_TLS_KEY,
          reloadMs: config.PROXYFLEET_GATEWAY_TLS_RELOAD_SECONDS * 1000,
          logger,
          registry,
        })
      : undefined;
  for (const gateway of gateways) {
    await upsertGatewayEndpoint(
      db.pool,
      {
        plan: gateway.spec.plan,
        host: gateway.spec.advertisedHost,
        port: gateway.spec.port,
        tls: tls !== undefined,
        refuseCredentialsInClear: tls !== undefined && (gateway.spec.tls?.refuseCredentialsInClear ?? false),
        locations: exitLocations(gateway.spec.exits),
      },
      'dev',
    );
    runningGateways.push(
      await startGateway({
        gateway,
        host: config.PROXYFLEET_GATEWAY_HOST,
        gatewayId: `dev-${gateway.metadata.name}`,
        allowCidrs: config.PROXYFLEET_GATEWAY_ALLOW_CIDRS,
        pool: db.pool,
        databaseUrl: db.sessionUrl,
        relayUrl,
        logger: logger.child({ gateway: gateway.metadata.name }),
        registry,
        health,
        ...(gatewayProcess ? { process: gatewayProcess } : {}),
        ...(tls ? { tls } : {}),
      }),
    );
  }

  const api = await startApi({
    config: {
      ...config,
      ...stripeConfig,
      PROXYFLEET_ADMIN_TOKEN: adminToken,
      PROXYFLEET_CREDENTIALS_KEY: credentialsKey,
      PROXYFLEET_RELAY_URL: relayUrl,
    },
    logger,
    registry,
    health,
    pool: db.pool,
    databaseUrl: db.sessionUrl,
  });
  // Stripe's webhooks go to the API as it listens (not 0.0.0.0: the stand-in connects to it).
  if (standIn) {
    const host = ['0.0.0.0', '::', ''].includes(config.PROXYFLEET_API_HOST)
      ? '127.0.0.1'
      : config.PROXYFLEET_API_HOST;
    standIn.webhookUrl = `http://${host.includes(':') ? `[${host}]` : host}:${api.port}${WEBHOOK_PATH}`;
  }
  logger.info(
    {
      pid: process.pid,
      api: `http://${config.PROXYFLEET_API_HOST}:${api.port}`,
      gateways: gateways.map((g) => `${g.spec.plan}:${g.spec.port}`),
      gatewayTls: tls !== undefined,
    },
    'proxyfleet dev is up',
  );

  shutdown.add({ name: 'api', run: () => api.close() });
  shutdown.add({
    name: 'gateways',
    run: async () => {
      await Promise.all(runningGateways.map((g) => g.close()));
      await gatewayProcess?.close();
      tls?.close();
    },
  });
  shutdown.add({ name: 'worker', run: () => worker.close() });
  if (mailSink) shutdown.add({ name: 'mail-sink', run: () => mailSink.close() });
});
