// PUT /admin/v1/accounts/:id/alerts: email alerts on or off; fields not given keep their value.
import { AppError } from '#common/errors.ts';
import { adminActor } from '#api/http/actor.ts';
import { updateAlerts } from '#api/modules/account/repo.ts';
import { alertsSchema, alertsUpdateSchema, type AlertsUpdate } from '#api/modules/account/schemas.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import { type AdminContext, type IdParams, oneAccount } from '../context.ts';

export function alertsRoute(ctx: AdminContext): RouteDef {
  return defineRoute<AlertsUpdate, IdParams>({
    method: 'put',
    path: '/accounts/:id/alerts',
    tag: 'admin',
    summary: 'Switch email alerts on or off (fields not given keep their value)',
    auth: 'admin',
    ...oneAccount,
    body: alertsUpdateSchema,
    response: alertsSchema,
    errors: ['VALIDATION_FAILED', 'ACCOUNT_NOT_FOUND'],
    handler: async ({ params, body, req }) => {
      const alerts = await updateAlerts(ctx.pool, params.id, body, adminActor(req));
      if (!alerts) throw new AppError('ACCOUNT_NOT_FOUND');
      return ctx.synced({ body: alerts });
    },
  });
}
