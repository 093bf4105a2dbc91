// GET /api/v1/sub-users/:subUserId: one sub-user of the account.
import { AppError } from '#common/errors.ts';
import { principal } from '#api/modules/auth/middleware.ts';
import { getSubUser } from '../repo.ts';
import { subUserSchema } from '../schemas.ts';
import { defineRoute, ok, okSchema, type RouteDef } from '#api/http/route.ts';
import { type SubUsersDeps, oneSubUser, type SubUserParams } from '../context.ts';

export function getSubUserRoute(deps: SubUsersDeps): RouteDef {
  const { pool, credentialsKey } = deps;
  return defineRoute<undefined, SubUserParams>({
    method: 'get',
    path: '/sub-users/:subUserId',
    tag: 'sub-users',
    summary: 'One sub-user',
    auth: 'apiKey',
    ...oneSubUser,
    response: okSchema(subUserSchema),
    errors: ['SUB_USER_NOT_FOUND'],
    handler: async ({ res, params }) => {
      const found = await getSubUser(pool, principal(res).accountId, params.subUserId, credentialsKey);
      if (!found) throw new AppError('SUB_USER_NOT_FOUND');
      return { body: ok(found) };
    },
  });
}
