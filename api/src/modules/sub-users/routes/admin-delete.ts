// DELETE /admin/v1/accounts/:id/sub-users/:subUserId: the account's sub-user gone.
import { AppError } from '#common/errors.ts';
import { adminActor } from '#api/http/actor.ts';
import { deleteSubUser } from '../repo.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import { type SubUsersDeps, accountSubUser, type AccountSubUserParams } from '../context.ts';

export function adminDeleteSubUserRoute(deps: SubUsersDeps): RouteDef {
  const { pool } = deps;
  return defineRoute<undefined, AccountSubUserParams>({
    method: 'delete',
    path: '/accounts/:id/sub-users/:subUserId',
    tag: 'admin',
    summary: "Delete an account's sub-user",
    auth: 'admin',
    ...accountSubUser,
    status: 204,
    errors: ['SUB_USER_NOT_FOUND'],
    handler: async ({ params, req }) => {
      if (!(await deleteSubUser(pool, params.id, params.subUserId, adminActor(req))))
        throw new AppError('SUB_USER_NOT_FOUND');
      return { status: 204 };
    },
  });
}
