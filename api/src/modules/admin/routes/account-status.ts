// POST /admin/v1/accounts/:id/suspend and /reactivate: one route of two actions; a suspended
// account's keys are refused on every API server before the answer.
import { AppError } from '#common/errors.ts';
import { setAccountStatus } from '#common/accounts/accounts.ts';
import { adminActor } from '#api/http/actor.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import * as s from '../schemas.ts';
import { type AdminContext, type IdParams, oneAccount } from '../context.ts';

export function accountStatusRoutes(ctx: AdminContext): RouteDef[] {
  return (['suspend', 'reactivate'] as const).map((action) =>
    defineRoute<undefined, IdParams>({
      method: 'post',
      path: `/accounts/:id/${action}`,
      tag: 'admin',
      summary:
        action === 'suspend'
          ? 'Suspend: every API key of the account is refused (401) on every API server before this returns'
          : 'Reactivate a suspended account',
      auth: 'admin',
      ...oneAccount,
      response: s.statusSchema,
      errors: ['ACCOUNT_NOT_FOUND'],
      handler: async ({ params, req }) => {
        const status = action === 'suspend' ? 'suspended' : 'active';
        if (!(await setAccountStatus(ctx.pool, params.id, status, adminActor(req))))
          throw new AppError('ACCOUNT_NOT_FOUND');
        return ctx.synced({ body: { id: params.id, status } });
      },
    }),
  );
}
