// POST /admin/v1/accounts/:id/keys/primary/regenerate: a new primary key; the old one stops at once.
import { regeneratePrimaryKey } from '#common/accounts/keys.ts';
import { adminActor } from '#api/http/actor.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import * as s from '../schemas.ts';
import { type AdminContext, type IdParams, oneAccount } from '../context.ts';

export function regeneratePrimaryKeyRoute(ctx: AdminContext): RouteDef {
  return defineRoute<undefined, IdParams>({
    method: 'post',
    path: '/accounts/:id/keys/primary/regenerate',
    tag: 'admin',
    summary: 'Replace the primary key; the old one stops working on every API server before this returns',
    auth: 'admin',
    ...oneAccount,
    response: s.createdKeySchema,
    errors: ['ACCOUNT_NOT_FOUND'],
    handler: async ({ params, req }) => {
      const key = await regeneratePrimaryKey(ctx.pool, params.id, undefined, adminActor(req));
      return ctx.synced({ body: key });
    },
  });
}
