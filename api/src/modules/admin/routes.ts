// /admin/v1: the operators' interface (docs/design.md "Interfaces that tests outside the project rely
// on"), wrapped by `npx proxyfleet admin`. One file per route in routes/, each with its tests; this
// file only lists them, in the order the OpenAPI document shows them. Every change that API caches
// hold (keys, status, balances, settings) answers only once every API process has applied it, and
// says how many did in the Proxyfleet-Cache-Sync header (context.ts).
import type { RouteDef } from '#api/http/route.ts';
import { adminContext, type AdminDeps } from './context.ts';
import { createAccountRoute } from './routes/create-account.ts';
import { listAccountsRoute } from './routes/list-accounts.ts';
import { getAccountRoute } from './routes/get-account.ts';
import { purchaseRoute } from './routes/purchase.ts';
import { dashboardInviteRoute } from './routes/dashboard-invite.ts';
import { listKeysRoute } from './routes/list-keys.ts';
import { regeneratePrimaryKeyRoute } from './routes/regenerate-primary-key.ts';
import { createKeyRoute } from './routes/create-key.ts';
import { revokeKeyRoute } from './routes/revoke-key.ts';
import { accountStatusRoutes } from './routes/account-status.ts';
import { alertsRoute } from './routes/alerts.ts';
import { autoRefillRoute } from './routes/auto-refill.ts';
import { throttleRoute } from './routes/throttle.ts';
import { resetProxyPasswordRoute } from './routes/reset-proxy-password.ts';
import { createIspProxyRoute } from './routes/create-isp-proxy.ts';
import { listIspProxiesRoute } from './routes/list-isp-proxies.ts';
import { deleteIspProxyRoute } from './routes/delete-isp-proxy.ts';

export function adminRoutes(deps: AdminDeps): RouteDef[] {
  const ctx = adminContext(deps);
  return [
    createAccountRoute(ctx),
    listAccountsRoute(ctx),
    getAccountRoute(ctx),
    purchaseRoute(ctx),
    dashboardInviteRoute(ctx),
    listKeysRoute(ctx),
    regeneratePrimaryKeyRoute(ctx),
    createKeyRoute(ctx),
    revokeKeyRoute(ctx),
    ...accountStatusRoutes(ctx),
    alertsRoute(ctx),
    autoRefillRoute(ctx),
    throttleRoute(ctx),
    resetProxyPasswordRoute(ctx),
    createIspProxyRoute(ctx),
    listIspProxiesRoute(ctx),
    deleteIspProxyRoute(ctx),
  ];
}
