import type { Pool } from '#common/db/pool.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import { principal } from '#api/modules/auth/middleware.ts';
import { usageResponseSchema } from './schemas.ts';
import type { UsageService } from './service.ts';
import { usageHistoryRoute } from './routes/history.ts';

export function usageRoutes(usage: UsageService, pool: Pool): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/usage',
      tag: 'usage',
      summary: 'Bandwidth balances and usage',
      description:
        'Per-product balances and aggregate usage. Figures are a snapshot shared by every API server, ' +
        'recomputed at most every 30 seconds (PROXYFLEET_USAGE_REFRESH_SECONDS); updatedAt says when. ' +
        'Cache-Control: private, max-age=N says in how many seconds a fresher snapshot is due (a purchase ' +
        'shows at once). Polling every few minutes is the advised rate.',
      auth: 'apiKey',
      response: usageResponseSchema,
      handler: async ({ res }) => {
        const { body, freshForSeconds } = await usage.usageAnswer(principal(res).accountId);
        return { body, headers: { 'Cache-Control': `private, max-age=${freshForSeconds}` } };
      },
    }),
    usageHistoryRoute(pool),
  ];
}
