// POST /admin/v1/accounts/:id/dashboard-invite: a one-time link that sets the dashboard password.
import { adminActor } from '#api/http/actor.ts';
import { createPasswordLink } from '#api/modules/password-links/service.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import * as s from '../schemas.ts';
import { type AdminContext, type IdParams, oneAccount } from '../context.ts';

export function dashboardInviteRoute(ctx: AdminContext): RouteDef {
  return defineRoute<undefined, IdParams>({
    method: 'post',
    path: '/accounts/:id/dashboard-invite',
    tag: 'admin',
    summary: 'A one-time link to set the dashboard password (also emailed to the account)',
    auth: 'admin',
    ...oneAccount,
    response: s.dashboardInviteSchema,
    status: 201,
    errors: ['ACCOUNT_NOT_FOUND'],
    handler: async ({ params, req }) => {
      // Audited: the link sets the account's password (never the link itself in the entry).
      const link = await createPasswordLink(ctx.pool, params.id, 'invite', ctx.linkBase(), {
        actor: adminActor(req),
        action: 'password.invited',
      });
      return { status: 201, body: { url: link.url, expiresAt: link.expiresAt.toISOString() } };
    },
  });
}
