// PATCH /admin/v1/accounts/:id/sub-users/:subUserId: suspend, resume, limits, caps.
import { AppError } from '#common/errors.ts';
import { adminActor } from '#api/http/actor.ts';
import { updateSubUser } from '../repo.ts';
import { subUserSchema, subUserUpdate, type SubUserUpdate } from '../schemas.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import { type SubUsersDeps, UPDATE_ERRORS, accountSubUser, type AccountSubUserParams } from '../context.ts';

export function adminUpdateSubUserRoute(deps: SubUsersDeps): RouteDef {
  const { pool, credentialsKey } = deps;
  return defineRoute<SubUserUpdate, AccountSubUserParams>({
    method: 'patch',
    path: '/accounts/:id/sub-users/:subUserId',
    tag: 'admin',
    summary: "Change an account's sub-user: suspend ({status: 'suspended'}), resume, limits, caps",
    auth: 'admin',
    ...accountSubUser,
    body: subUserUpdate,
    response: subUserSchema,
    errors: [...UPDATE_ERRORS],
    handler: async ({ params, body, req }) => {
      const found = await updateSubUser(
        pool,
        params.id,
        params.subUserId,
        body,
        credentialsKey,
        adminActor(req),
      );
      if (!found) throw new AppError('SUB_USER_NOT_FOUND');
      return { body: found };
    },
  });
}
