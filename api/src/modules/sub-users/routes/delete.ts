// DELETE /api/v1/sub-users/:subUserId: the sub-user gone; its connections end within a second.
import { AppError } from '#common/errors.ts';
import { apiKeyActor } from '#api/http/actor.ts';
import { principal } from '#api/modules/auth/middleware.ts';
import { deleteSubUser } from '../repo.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import { type SubUsersDeps, oneSubUser, type SubUserParams } from '../context.ts';

export function deleteSubUserRoute(deps: SubUsersDeps): RouteDef {
  const { pool } = deps;
  return defineRoute<undefined, SubUserParams>({
    method: 'delete',
    path: '/sub-users/:subUserId',
    tag: 'sub-users',
    summary: 'Delete a sub-user; its connections end within a second',
    auth: 'apiKey',
    ...oneSubUser,
    status: 204,
    errors: ['SUB_USER_NOT_FOUND'],
    handler: async ({ req, res, params }) => {
      if (!(await deleteSubUser(pool, principal(res).accountId, params.subUserId, apiKeyActor(req, res))))
        throw new AppError('SUB_USER_NOT_FOUND');
      return { status: 204 };
    },
  });
}
