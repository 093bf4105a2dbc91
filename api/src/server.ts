// Builds the API's services (change feed, caches, limiters) and starts its HTTP server; used by
// the api entrypoint and by dev.
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { Express } from 'express';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import type { Health } from '#common/health.ts';
import type { Logger } from '#common/logger.ts';
import type { Pool } from '#common/db/pool.ts';
import { openChangeSource } from '#common/db/relay-feed.ts';
import type { ApiConfig } from './config.ts';
import { createApp } from './app.ts';
import { ApiMetrics } from './http/metrics.ts';
import { answerClientError } from './http/plumbing.ts';
import { KeyCache } from './modules/auth/key-cache.ts';
import { KeyUsageRecorder } from './modules/auth/key-usage.ts';
import { RateLimiter } from './modules/rate-limit/limiter.ts';
import { UsageService } from './modules/usage/service.ts';
import { usageRoutes } from './modules/usage/routes.ts';
import { adminTargetRoutes, targetRoutes } from './modules/targets/routes.ts';
import { AccountService } from './modules/account/service.ts';
import { accountRoutes } from './modules/account/routes.ts';
import { proxiesRoutes } from './modules/proxies/routes.ts';
import { locationsRoutes } from './modules/locations/routes.ts';
import { adminRoutes } from './modules/admin/routes.ts';
import { adminAllowlistRoutes, allowlistRoutes } from './modules/ip-allowlist/routes.ts';
import { adminSubUserRoutes, subUserRoutes } from './modules/sub-users/routes.ts';
import { adminBillingRoutes, billingRoutes } from './modules/billing/routes.ts';
import { purchaseRoutes } from './modules/purchases/routes.ts';
import { cardRoutes } from './modules/cards/routes.ts';
import { stripeWebhook } from './modules/cards/webhook.ts';
import { cardMethod, stripeClient } from '#common/billing/stripe.ts';
import { paymentMethods } from '#common/billing/payment.ts';
import { sellerFromConfig } from './modules/billing/pdf.ts';
import { invoiceFileRoutes } from './modules/billing/invoice-files.ts';
import { adminSubscriptionRoutes, subscriptionRoutes } from './modules/subscriptions/routes.ts';
import { adminAuditLogRoutes, auditLogRoutes } from './modules/audit-log/routes.ts';
import { adminTwoFactorRoutes } from './modules/two-factor/routes.ts';
import { cacheSync } from './modules/sync/wait.ts';
import { dashboardRouter } from './modules/dashboard/router.ts';
import { linkBaseFrom } from './modules/password-links/service.ts';
import { ResetRequests } from './modules/password-links/reset-requests.ts';

export interface ApiDeps {
  config: Readonly<ApiConfig>;
  logger: Logger;
  registry: Registry;
  health: Health;
  pool: Pool;
  databaseUrl: string;
}

export interface RunningApi {
  port: number;
  /** This process's name in cache_acks. */
  instance: string;
  /** The Express application (tests enumerate its mounted routes). */
  app: Express;
  /** "Forgot password?" asks handled after the answer (tests pause it and wait for it). */
  resetRequests: ResetRequests;
  /** performance.now() of the last connection accepted (the pod's preStop waits for them to stop). */
  lastConnectionAt(): number;
  close(): Promise<void>;
}

export async function startApi(deps: ApiDeps): Promise<RunningApi> {
  const { config, logger, pool } = deps;
  const instance = config.PROXYFLEET_INSTANCE_ID ?? `api-${os.hostname()}-${randomBytes(3).toString('hex')}`;
  const feed = openChangeSource({
    relayUrl: config.PROXYFLEET_RELAY_URL,
    databaseUrl: deps.databaseUrl,
    logger: logger.child({ feed: 'api' }),
    registry: deps.registry,
    component: 'api',
    ack: { instance, component: 'api' },
  });
  const metrics = new ApiMetrics(deps.registry);
  const keys = new KeyCache(pool, feed);
  const usage = new UsageService(pool, feed, config.PROXYFLEET_USAGE_REFRESH_SECONDS);
  const accounts = new AccountService(pool, feed, usage);
  const keyUsage = new KeyUsageRecorder(pool, logger);
  await feed.start();
  deps.health.addInfo('cacheVersion', () => feed.version);

  const waitForApiCaches = cacheSync(pool, logger, config.PROXYFLEET_API_SYNC_TIMEOUT_MS);
  const allowlist = {
    pool,
    limit: config.PROXYFLEET_IP_ALLOWLIST_MAX,
    allowPrivate: config.PROXYFLEET_IP_ALLOWLIST_PRIVATE,
  };
  const purchaseLimits = {
    perPurchaseGb: config.PROXYFLEET_PURCHASE_MAX_GB,
    perDayGb: config.PROXYFLEET_PURCHASE_DAILY_MAX_GB,
  };
  const seller = sellerFromConfig(config);
  const stripe = stripeClient(config);
  // Customers' own subscriptions, from the API and the Billing page: the first month paid now.
  const subscribe = {
    pool,
    methods: paymentMethods(...(stripe ? [cardMethod(pool, stripe)] : [])),
    limits: { perPurchaseGb: purchaseLimits.perPurchaseGb, maxActive: config.PROXYFLEET_SUBSCRIPTIONS_MAX },
  };
  const subUsers = {
    pool,
    credentialsKey: config.PROXYFLEET_CREDENTIALS_KEY,
    limit: config.PROXYFLEET_SUB_USERS_MAX,
  };
  const proxies = {
    pool,
    credentialsKey: config.PROXYFLEET_CREDENTIALS_KEY,
    fallbackHost: config.PROXYFLEET_PUBLIC_GATEWAY_HOST,
  };
  // Links in emails come from configuration only; unset, the listen address, known once listening.
  let listening = { host: config.PROXYFLEET_API_HOST, port: config.PROXYFLEET_API_PORT };
  const linkBase = () => linkBaseFrom(config.PROXYFLEET_DASHBOARD_URL, listening);
  const resetRequests = new ResetRequests({
    pool,
    logger: logger.child({ job: 'password-reset' }),
    linkBase,
  });
  const app = createApp({
    health: deps.health,
    logger,
    metrics,
    bodyLimitBytes: config.PROXYFLEET_API_BODY_LIMIT_BYTES,
    trustProxy:
      config.PROXYFLEET_API_TRUSTED_PROXIES.length > 0
        ? config.PROXYFLEET_API_TRUSTED_PROXIES
        : config.PROXYFLEET_API_TRUST_PROXY_HOPS,
    auth: {
      keys,
      usage: keyUsage,
      metrics,
      adminToken: config.PROXYFLEET_ADMIN_TOKEN,
      keyLimiter: new RateLimiter(pool, {
        name: 'key',
        perMinute: config.PROXYFLEET_RATE_LIMIT_PER_MINUTE,
        burst: config.PROXYFLEET_RATE_LIMIT_BURST,
      }),
      failureLimiter: new RateLimiter(pool, {
        name: 'auth-failures',
        perMinute: config.PROXYFLEET_AUTH_FAILURES_PER_MINUTE,
        burst: config.PROXYFLEET_AUTH_FAILURES_BURST,
      }),
    },
    webhooks:
      stripe && config.PROXYFLEET_STRIPE_WEBHOOK_SECRET
        ? stripeWebhook({
            pool,
            stripe,
            secret: config.PROXYFLEET_STRIPE_WEBHOOK_SECRET,
            logger: logger.child({ module: 'stripe-webhook' }),
          })
        : undefined,
    apiRoutes: [
      ...accountRoutes(accounts),
      ...usageRoutes(usage, pool),
      ...targetRoutes(pool),
      ...allowlistRoutes(allowlist),
      ...subUserRoutes(subUsers),
      ...proxiesRoutes(proxies),
      ...locationsRoutes(pool),
      ...billingRoutes(pool),
      ...purchaseRoutes(pool, purchaseLimits, waitForApiCaches),
      ...cardRoutes({ pool, stripe, limits: purchaseLimits, waitForApiCaches, linkBase }),
      ...invoiceFileRoutes(pool, seller),
      ...subscriptionRoutes({ ...subscribe, waitForApiCaches }),
      ...auditLogRoutes(pool),
    ],
    adminRoutes: [
      ...adminRoutes({
        pool,
        credentialsKey: config.PROXYFLEET_CREDENTIALS_KEY,
        accounts,
        waitForApiCaches,
        linkBase,
      }),
      ...adminBillingRoutes(pool, waitForApiCaches),
      ...adminSubscriptionRoutes(pool),
      ...adminTargetRoutes(pool),
      ...adminAllowlistRoutes(allowlist),
      ...adminSubUserRoutes(subUsers),
      ...adminAuditLogRoutes(pool),
      ...adminTwoFactorRoutes(pool),
    ],
    dashboard: dashboardRouter({
      pool,
      logger: logger.child({ module: 'dashboard' }),
      credentialsKey: config.PROXYFLEET_CREDENTIALS_KEY,
      usage,
      proxies,
      allowlist,
      subUsers,
      purchaseLimits,
      subscribe,
      seller,
      waitForApiCaches,
      https: config.PROXYFLEET_DASHBOARD_HTTPS,
      resetRequests,
      stripe,
      linkBase,
    }),
  });

  const server = http.createServer(app);
  server.keepAliveTimeout = 65_000; // above common load balancers' idle timeout (60 s)
  server.on('clientError', answerClientError);
  let lastConnectionAt = 0;
  server.on('connection', () => {
    lastConnectionAt = performance.now();
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.PROXYFLEET_API_PORT, config.PROXYFLEET_API_HOST, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (err) {
    await keyUsage.close();
    await feed.close();
    throw err;
  }
  const port = (server.address() as AddressInfo).port;
  listening = { host: config.PROXYFLEET_API_HOST, port };
  logger.info({ port, instance }, 'api listening');
  return {
    port,
    instance,
    app,
    resetRequests,
    lastConnectionAt: () => lastConnectionAt,
    close: async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), 5_000).unref();
      });
      resetRequests.resume();
      await resetRequests.idle();
      await keyUsage.close();
      await feed.close();
    },
  };
}
