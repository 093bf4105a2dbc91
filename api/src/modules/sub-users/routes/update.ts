// PATCH /api/v1/sub-users/:subUserId: any field changed; traffic limits merge per product.
import { AppError } from '#common/errors.ts';
import { apiKeyActor } from '#api/http/actor.ts';
import { principal } from '#api/modules/auth/middleware.ts';
import { updateSubUser } from '../repo.ts';
import { subUserSchema, subUserUpdate, type SubUserUpdate } from '../schemas.ts';
import { defineRoute, ok, okSchema, type RouteDef } from '#api/http/route.ts';
import { type SubUsersDeps, DESCRIPTION, UPDATE_ERRORS, oneSubUser, type SubUserParams } from '../context.ts';

export function updateSubUserRoute(deps: SubUsersDeps): RouteDef {
  const { pool, credentialsKey } = deps;
  return defineRoute<SubUserUpdate, SubUserParams>({
    method: 'patch',
    path: '/sub-users/:subUserId',
    tag: 'sub-users',
    summary: 'Change a sub-user: any field; trafficLimits merge per product (null removes a limit)',
    description: DESCRIPTION,
    auth: 'apiKey',
    ...oneSubUser,
    body: subUserUpdate,
    response: okSchema(subUserSchema),
    errors: [...UPDATE_ERRORS],
    handler: async ({ req, res, params, body }) => {
      const found = await updateSubUser(
        pool,
        principal(res).accountId,
        params.subUserId,
        body,
        credentialsKey,
        apiKeyActor(req, res),
      );
      if (!found) throw new AppError('SUB_USER_NOT_FOUND');
      return { body: ok(found) };
    },
  });
}
