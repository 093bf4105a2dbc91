// POST /admin/v1/accounts/:id/isp-proxies: a static ISP proxy assigned to the account.
import { AppError } from '#common/errors.ts';
import { SQLSTATE, sqlState } from '#common/db/pool.ts';
import { newProxyPassword, seal } from '#common/secrets.ts';
import { adminActor } from '#api/http/actor.ts';
import { toIspProxy } from '#api/modules/proxies/service.ts';
import { ispProxySchema } from '#api/modules/proxies/schemas.ts';
import { insertIspProxy } from '../repo.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import * as s from '../schemas.ts';
import { type AdminContext, type IdParams, oneAccount } from '../context.ts';

export function createIspProxyRoute(ctx: AdminContext): RouteDef {
  return defineRoute<s.CreateIspProxy, IdParams>({
    method: 'post',
    path: '/accounts/:id/isp-proxies',
    tag: 'admin',
    summary: 'Assign a static ISP proxy to the account',
    auth: 'admin',
    ...oneAccount,
    body: s.createIspProxySchema,
    response: ispProxySchema,
    status: 201,
    errors: ['VALIDATION_FAILED', 'ACCOUNT_NOT_FOUND', 'ISP_PROXY_EXISTS'],
    handler: async ({ params, body, req }) => {
      await ctx.mustExist(params.id);
      const { password, ...rest } = body;
      try {
        const row = await insertIspProxy(
          ctx.pool,
          params.id,
          { ...rest, passwordEnc: seal(ctx.credentialsKey, password ?? newProxyPassword()) },
          adminActor(req),
        );
        return { status: 201, body: toIspProxy(row, ctx.credentialsKey) };
      } catch (err) {
        if (sqlState(err) === SQLSTATE.UNIQUE_VIOLATION) throw new AppError('ISP_PROXY_EXISTS');
        if (sqlState(err) === SQLSTATE.FOREIGN_KEY_VIOLATION) throw new AppError('ACCOUNT_NOT_FOUND');
        throw err;
      }
    },
  });
}
