// Sub-users (docs/adr/0037): named proxy users of an account, each with its own
// proxy credentials, traffic limits per product and caps. The customer's routes (/api/v1/sub-users)
// and the operator's (/admin/v1/accounts/:id/sub-users) share the repo and the schemas. Gateways
// learn every change from the database's triggers (change_log), nothing is called here.
import { z } from 'zod';
import { AppError } from '#common/errors.ts';
import type { Pool } from '#common/db/pool.ts';
import { defineRoute, ok, okSchema, type RouteDef } from '../../http/route.ts';
import { principal } from '../auth/middleware.ts';
import { adminActor, apiKeyActor } from '../../http/actor.ts';
import { accountParams, uuid } from '../../http/schemas.ts';
import {
  createSubUser,
  deleteSubUser,
  getSubUser,
  listSubUsers,
  readSubUserUsage,
  updateSubUser,
} from './repo.ts';
import {
  subUserCreate,
  subUserListSchema,
  subUserSchema,
  subUserUpdate,
  subUserUsageQuery,
  subUserUsageSchema,
  type SubUserCreate,
  type SubUserUpdate,
  type SubUserUsageQuery,
} from './schemas.ts';

export interface SubUsersDeps {
  pool: Pool;
  credentialsKey: Buffer;
  /** Sub-users per account (PROXYFLEET_SUB_USERS_MAX). */
  limit: number;
}

const DESCRIPTION =
  "A sub-user's username and password replace the account's in proxy strings (targeting is written " +
  "the same way). Its traffic is the account's (billed from the account's balance); a limit per " +
  'product caps what the sub-user may use over its lifetime. Gateways apply a change within a second.';
const CREATE_ERRORS = [
  'VALIDATION_FAILED',
  'SUB_USER_LIMIT',
  'SUB_USER_NAME_TAKEN',
  'PROXY_USERNAME_TAKEN',
] as const;
const subUserParams = z.object({ subUserId: uuid });
const adminSubUserParams = z.object({ id: uuid, subUserId: uuid });
type SubUserParams = z.infer<typeof subUserParams>;
type AdminSubUserParams = z.infer<typeof adminSubUserParams>;

/** The account behind the key was deleted between authentication and the query. */
const keyGone = (err: unknown) => {
  throw err instanceof AppError && err.code === 'ACCOUNT_NOT_FOUND' ? new AppError('INVALID_API_KEY') : err;
};

export function subUserRoutes(deps: SubUsersDeps): RouteDef[] {
  const { pool, credentialsKey } = deps;
  const one = { params: subUserParams, paramsError: 'SUB_USER_NOT_FOUND' as const };
  return [
    defineRoute({
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
    }),
    defineRoute<SubUserCreate>({
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
    }),
    defineRoute<undefined, SubUserParams>({
      method: 'get',
      path: '/sub-users/:subUserId',
      tag: 'sub-users',
      summary: 'One sub-user',
      auth: 'apiKey',
      ...one,
      response: okSchema(subUserSchema),
      errors: ['SUB_USER_NOT_FOUND'],
      handler: async ({ res, params }) => {
        const found = await getSubUser(pool, principal(res).accountId, params.subUserId, credentialsKey);
        if (!found) throw new AppError('SUB_USER_NOT_FOUND');
        return { body: ok(found) };
      },
    }),
    defineRoute<SubUserUpdate, SubUserParams>({
      method: 'patch',
      path: '/sub-users/:subUserId',
      tag: 'sub-users',
      summary: 'Change a sub-user: any field; trafficLimits merge per product (null removes a limit)',
      description: DESCRIPTION,
      auth: 'apiKey',
      ...one,
      body: subUserUpdate,
      response: okSchema(subUserSchema),
      errors: ['VALIDATION_FAILED', 'SUB_USER_NOT_FOUND', 'SUB_USER_NAME_TAKEN', 'PROXY_USERNAME_TAKEN'],
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
    }),
    defineRoute<undefined, SubUserParams>({
      method: 'delete',
      path: '/sub-users/:subUserId',
      tag: 'sub-users',
      summary: 'Delete a sub-user; its connections end within a second',
      auth: 'apiKey',
      ...one,
      status: 204,
      errors: ['SUB_USER_NOT_FOUND'],
      handler: async ({ req, res, params }) => {
        if (!(await deleteSubUser(pool, principal(res).accountId, params.subUserId, apiKeyActor(req, res))))
          throw new AppError('SUB_USER_NOT_FOUND');
        return { status: 204 };
      },
    }),
    defineRoute<undefined, SubUserParams, SubUserUsageQuery>({
      method: 'get',
      path: '/sub-users/:subUserId/usage',
      tag: 'sub-users',
      summary: "A sub-user's traffic per hour and product over the last days (?days=1..31, default 7)",
      description:
        "Figures arrive with the gateways' usage flushes and the worker's folding (seconds). The " +
        "sub-user's lifetime use per product, which its limits count, is in GET /sub-users/{subUserId}.",
      auth: 'apiKey',
      ...one,
      query: subUserUsageQuery,
      response: subUserUsageSchema,
      errors: ['VALIDATION_FAILED', 'SUB_USER_NOT_FOUND'],
      handler: async ({ res, params, query }) => {
        const usage = await readSubUserUsage(pool, principal(res).accountId, params.subUserId, query);
        if (!usage) throw new AppError('SUB_USER_NOT_FOUND');
        return { body: usage };
      },
    }),
  ];
}

export function adminSubUserRoutes(deps: SubUsersDeps): RouteDef[] {
  const { pool, credentialsKey } = deps;
  const one = { params: adminSubUserParams, paramsError: 'SUB_USER_NOT_FOUND' as const };
  return [
    defineRoute<undefined, { id: string }>({
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
    }),
    defineRoute<SubUserCreate, { id: string }>({
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
    }),
    defineRoute<SubUserUpdate, AdminSubUserParams>({
      method: 'patch',
      path: '/accounts/:id/sub-users/:subUserId',
      tag: 'admin',
      summary: "Change an account's sub-user: suspend ({status: 'suspended'}), resume, limits, caps",
      auth: 'admin',
      ...one,
      body: subUserUpdate,
      response: subUserSchema,
      errors: ['VALIDATION_FAILED', 'SUB_USER_NOT_FOUND', 'SUB_USER_NAME_TAKEN', 'PROXY_USERNAME_TAKEN'],
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
    }),
    defineRoute<undefined, AdminSubUserParams>({
      method: 'delete',
      path: '/accounts/:id/sub-users/:subUserId',
      tag: 'admin',
      summary: "Delete an account's sub-user",
      auth: 'admin',
      ...one,
      status: 204,
      errors: ['SUB_USER_NOT_FOUND'],
      handler: async ({ params, req }) => {
        if (!(await deleteSubUser(pool, params.id, params.subUserId, adminActor(req))))
          throw new AppError('SUB_USER_NOT_FOUND');
        return { status: 204 };
      },
    }),
  ];
}
