// GET /admin/v1/accounts/:id/sub-users: an account's sub-users, for the operator.
import { AppError } from '#common/errors.ts';
import { accountParams } from '#api/http/schemas.ts';
import { listSubUsers } from '../repo.ts';
import { subUserListSchema } from '../schemas.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import type { SubUsersDeps } from '../context.ts';

export function adminListSubUsersRoute(deps: SubUsersDeps): RouteDef {
  const { pool, credentialsKey } = deps;
  return defineRoute<undefined, { id: string }>({
    method: 'get',
    path: '/accounts/:id/sub-users',
    tag: 'admin',
    summary: "An account's sub-users",
    auth: 'admin',
    params: accountParams,
    paramsError: 'ACCOUNT_NOT_FOUND',
    response: subUserListSchema,
    errors: ['ACCOUNT_NOT_FOUND'],
    handler: async ({ params }) => {
      const subUsers = await listSubUsers(pool, params.id, credentialsKey);
      if (!subUsers) throw new AppError('ACCOUNT_NOT_FOUND');
      return { body: { subUsers, limit: deps.limit } };
    },
  });
}
