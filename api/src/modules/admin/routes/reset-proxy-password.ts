// POST /admin/v1/accounts/:id/proxy-password/reset: a new proxy password; the old one stops on the gateways.
import { readProxyCredentials, resetProxyPassword } from '#common/accounts/accounts.ts';
import { adminActor } from '#api/http/actor.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import * as s from '../schemas.ts';
import { type AdminContext, type IdParams, oneAccount } from '../context.ts';

export function resetProxyPasswordRoute(ctx: AdminContext): RouteDef {
  return defineRoute<undefined, IdParams>({
    method: 'post',
    path: '/accounts/:id/proxy-password/reset',
    tag: 'admin',
    summary: 'Issue a new proxy password; the old one stops working on the gateways',
    auth: 'admin',
    ...oneAccount,
    response: s.proxyPasswordSchema,
    errors: ['ACCOUNT_NOT_FOUND'],
    handler: async ({ params, req }) => {
      const proxyPassword = await resetProxyPassword(
        ctx.pool,
        params.id,
        ctx.credentialsKey,
        adminActor(req),
      );
      const { username } = await readProxyCredentials(ctx.pool, params.id, ctx.credentialsKey);
      return ctx.synced({ body: { proxyUsername: username, proxyPassword } });
    },
  });
}
