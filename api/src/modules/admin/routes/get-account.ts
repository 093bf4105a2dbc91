// GET /admin/v1/accounts/:id: the record the account's owner sees at GET /api/v1/account.
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import { type AdminContext, type IdParams, oneAccount } from '../context.ts';

export function getAccountRoute(ctx: AdminContext): RouteDef {
  return defineRoute<undefined, IdParams>({
    method: 'get',
    path: '/accounts/:id',
    tag: 'admin',
    summary: 'One account: the record its owner sees at GET /api/v1/account',
    auth: 'admin',
    ...oneAccount,
    errors: ['ACCOUNT_NOT_FOUND'],
    handler: async ({ params }) => {
      const { success: _, ...view } = await ctx.accounts.view(params.id);
      return { body: view };
    },
  });
}
