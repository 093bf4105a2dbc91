// POST /admin/v1/accounts/:id/sub-users: a new sub-user of the account named.
import { adminActor } from '#api/http/actor.ts';
import { accountParams } from '#api/http/schemas.ts';
import { createSubUser } from '../repo.ts';
import { subUserCreate, subUserSchema, type SubUserCreate } from '../schemas.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import { type SubUsersDeps, DESCRIPTION, CREATE_ERRORS } from '../context.ts';

export function adminCreateSubUserRoute(deps: SubUsersDeps): RouteDef {
  const { pool, credentialsKey } = deps;
  return defineRoute<SubUserCreate, { id: string }>({
    method: 'post',
    path: '/accounts/:id/sub-users',
    tag: 'admin',
    summary: 'Create a sub-user for an account',
    description: DESCRIPTION,
    auth: 'admin',
    params: accountParams,
    paramsError: 'ACCOUNT_NOT_FOUND',
    body: subUserCreate,
    response: subUserSchema,
    status: 201,
    errors: [...CREATE_ERRORS, 'ACCOUNT_NOT_FOUND'],
    handler: async ({ params, body, req }) => ({
      status: 201,
      body: await createSubUser(pool, params.id, body, deps.limit, credentialsKey, adminActor(req)),
    }),
  });
}
