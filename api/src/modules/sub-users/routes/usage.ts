// GET /api/v1/sub-users/:subUserId/usage: a sub-user's traffic per hour and product.
import { AppError } from '#common/errors.ts';
import { principal } from '#api/modules/auth/middleware.ts';
import { readSubUserUsage } from '../repo.ts';
import { subUserUsageQuery, subUserUsageSchema, type SubUserUsageQuery } from '../schemas.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import { type SubUsersDeps, oneSubUser, type SubUserParams } from '../context.ts';

export function subUserUsageRoute(deps: SubUsersDeps): RouteDef {
  const { pool } = deps;
  return defineRoute<undefined, SubUserParams, SubUserUsageQuery>({
    method: 'get',
    path: '/sub-users/:subUserId/usage',
    tag: 'sub-users',
    summary: "A sub-user's traffic per hour and product over the last days (?days=1..31, default 7)",
    description:
      "Figures arrive with the gateways' usage flushes and the worker's folding (seconds). The " +
      "sub-user's lifetime use per product, which its limits count, is in GET /sub-users/{subUserId}.",
    auth: 'apiKey',
    ...oneSubUser,
    query: subUserUsageQuery,
    response: subUserUsageSchema,
    errors: ['VALIDATION_FAILED', 'SUB_USER_NOT_FOUND'],
    handler: async ({ res, params, query }) => {
      const usage = await readSubUserUsage(pool, principal(res).accountId, params.subUserId, query);
      if (!usage) throw new AppError('SUB_USER_NOT_FOUND');
      return { body: usage };
    },
  });
}
