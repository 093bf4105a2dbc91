// GET /admin/v1/accounts/:id/isp-proxies: the account's ISP proxies, as the customer's list shows them.
import { z } from 'zod';
import { toIspProxy } from '#api/modules/proxies/service.ts';
import { listIspProxies } from '#api/modules/proxies/repo.ts';
import { ispProxySchema } from '#api/modules/proxies/schemas.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import { type AdminContext, type IdParams, oneAccount } from '../context.ts';

export function listIspProxiesRoute(ctx: AdminContext): RouteDef {
  return defineRoute<undefined, IdParams>({
    method: 'get',
    path: '/accounts/:id/isp-proxies',
    tag: 'admin',
    summary: "The account's ISP proxies, as GET /api/v1/proxies/list shows them",
    auth: 'admin',
    ...oneAccount,
    response: z.object({ proxies: z.array(ispProxySchema) }),
    errors: ['ACCOUNT_NOT_FOUND'],
    handler: async ({ params }) => {
      await ctx.mustExist(params.id);
      const rows = await listIspProxies(ctx.pool, params.id);
      return { body: { proxies: rows.map((r) => toIspProxy(r, ctx.credentialsKey)) } };
    },
  });
}
