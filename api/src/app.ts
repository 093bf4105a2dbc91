// The Express application: /healthz, /readyz, /metrics, the customer API under /api/v1 and the
// operators' API under /admin/v1. Everything it needs is passed in (server.ts builds it).
import express from 'express';
import { cidrMatcher } from '#common/cidr.ts';
import type { Health } from '#common/health.ts';
import type { Logger } from '#common/logger.ts';
import { errorHandler } from './http/errors.ts';
import type { ApiMetrics } from './http/metrics.ts';
import { openApiDocument, type RouteGroup } from './http/openapi.ts';
import { notFound, rejectNul, requestPlumbing, requireJsonBody } from './http/plumbing.ts';
import { mountRoutes, type AuthKind } from './http/route.ts';
import { adminAuth, apiKeyAuth, type AuthDeps } from './modules/auth/middleware.ts';

export const API_PREFIX = '/api/v1';
export const ADMIN_PREFIX = '/admin/v1';
export const API_VERSION = '1.0.0';

export interface AppDeps {
  health: Health;
  logger: Logger;
  metrics: ApiMetrics;
  auth: AuthDeps;
  apiRoutes: RouteGroup['routes'];
  adminRoutes: RouteGroup['routes'];
  bodyLimitBytes: number;
  /**
   * Express "trust proxy": hops of reverse proxies whose X-Forwarded-* headers are believed (0:
   * none), or the proxies' address ranges (only a peer in them is believed).
   */
  trustProxy: number | readonly string[];
  /** POST /webhooks/stripe with its raw body (modules/cards/webhook.ts), when card payments are on. */
  webhooks?: express.Router | undefined;
  /** The customer dashboard, mounted at / (modules/dashboard). */
  dashboard?: express.Router;
}

/**
 * Express's trust function: hops count whoever connects; ranges trust a peer only inside them,
 * for req.secure (X-Forwarded-Proto) and for each X-Forwarded-For hop walked back to the client.
 */
function trustProxy(setting: number | readonly string[]): number | ((address: string) => boolean) {
  if (typeof setting === 'number') return setting;
  const trusted = cidrMatcher(setting);
  return (address) => trusted(address);
}

export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.set('trust proxy', trustProxy(deps.trustProxy));
  app.use(requestPlumbing(deps.logger, deps.metrics));
  app.use((req, res, next) => {
    // The pod's preStop is answered on the health port only (PROXYFLEET_HEALTH_PORT, api/src/main.ts).
    if (!deps.health.handle(req, res, { preStop: false })) next();
  });

  if (deps.webhooks) app.use(deps.webhooks);

  const groups: RouteGroup[] = [
    { prefix: API_PREFIX, routes: deps.apiRoutes },
    { prefix: ADMIN_PREFIX, routes: deps.adminRoutes },
  ];
  const document = openApiDocument(groups, API_VERSION);
  const auth: Record<AuthKind, express.RequestHandler[]> = {
    apiKey: [apiKeyAuth(deps.auth)],
    admin: [adminAuth(deps.auth)],
    none: [],
  };

  const bodyParsers = [
    requireJsonBody,
    express.json({ limit: deps.bodyLimitBytes, strict: true }),
    rejectNul,
  ];

  const api = express.Router();
  api.get('/openapi.json', (_req, res) => void res.json(document));
  mountRoutes(api, deps.apiRoutes, auth, bodyParsers);
  app.use(API_PREFIX, api);

  const admin = express.Router();
  mountRoutes(admin, deps.adminRoutes, auth, bodyParsers);
  app.use(ADMIN_PREFIX, admin);
  if (deps.dashboard) app.use(deps.dashboard);

  app.use(notFound(groups));
  app.use(errorHandler(deps.logger));
  return app;
}
