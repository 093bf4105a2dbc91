// POST /api/v1/sub-users: a new sub-user; the answer carries its proxy username and password.
import { apiKeyActor } from '#api/http/actor.ts';
import { principal } from '#api/modules/auth/middleware.ts';
import { createSubUser } from '../repo.ts';
import { subUserCreate, subUserSchema, type SubUserCreate } from '../schemas.ts';
import { defineRoute, ok, okSchema, type RouteDef } from '#api/http/route.ts';
import { type SubUsersDeps, DESCRIPTION, CREATE_ERRORS, keyGone } from '../context.ts';

export function createSubUserRoute(deps: SubUsersDeps): RouteDef {
  const { pool, credentialsKey } = deps;
  return defineRoute<SubUserCreate>({
    method: 'post',
    path: '/sub-users',
    tag: 'sub-users',
    summary: 'Create a sub-user; the answer carries its proxy username and password',
    description: DESCRIPTION,
    auth: 'apiKey',
    body: subUserCreate,
    response: okSchema(subUserSchema),
    status: 201,
    errors: [...CREATE_ERRORS],
    handler: async ({ req, res, body }) => ({
      status: 201,
      body: ok(
        await createSubUser(
          pool,
          principal(res).accountId,
          body,
          deps.limit,
          credentialsKey,
          apiKeyActor(req, res),
        ).catch(keyGone),
      ),
    }),
  });
}
