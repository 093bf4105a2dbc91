// DELETE /admin/v1/accounts/:id/isp-proxies/:proxyId: an ISP proxy taken from the account.
import type { z } from 'zod';
import { AppError } from '#common/errors.ts';
import { adminActor } from '#api/http/actor.ts';
import { deleteIspProxy } from '../repo.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import * as s from '../schemas.ts';
import type { AdminContext } from '../context.ts';

export function deleteIspProxyRoute(ctx: AdminContext): RouteDef {
  return defineRoute<undefined, z.infer<typeof s.ispProxyParams>>({
    method: 'delete',
    path: '/accounts/:id/isp-proxies/:proxyId',
    tag: 'admin',
    summary: 'Remove an ISP proxy from the account',
    auth: 'admin',
    params: s.ispProxyParams,
    paramsError: 'ISP_PROXY_NOT_FOUND',
    status: 204,
    errors: ['ISP_PROXY_NOT_FOUND'],
    handler: async ({ params, req }) => {
      if (!(await deleteIspProxy(ctx.pool, params.id, params.proxyId, adminActor(req))))
        throw new AppError('ISP_PROXY_NOT_FOUND');
      return { status: 204 };
    },
  });
}
