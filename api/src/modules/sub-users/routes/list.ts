// GET /api/v1/sub-users: the account's sub-users, with their limits and what they used.
import { AppError } from '#common/errors.ts';
import { principal } from '#api/modules/auth/middleware.ts';
import { listSubUsers } from '../repo.ts';
import { subUserListSchema } from '../schemas.ts';
import { defineRoute, ok, okSchema, type RouteDef } from '#api/http/route.ts';
import { type SubUsersDeps, DESCRIPTION } from '../context.ts';

export function listSubUsersRoute(deps: SubUsersDeps): RouteDef {
  const { pool, credentialsKey } = deps;
  return defineRoute({
    method: 'get',
    path: '/sub-users',
    tag: 'sub-users',
    summary: "The account's sub-users, with their limits and what they used",
    description: DESCRIPTION,
    auth: 'apiKey',
    response: okSchema(subUserListSchema),
    handler: async ({ res }) => {
      const subUsers = await listSubUsers(pool, principal(res).accountId, credentialsKey);
      if (!subUsers) throw new AppError('INVALID_API_KEY');
      return { body: ok({ subUsers, limit: deps.limit }) };
    },
  });
}
