// Target statistics for the customer (docs/adr/0026): GET /usage/targets and the opt-out switch.
// The operator's equivalents are in admin/routes.ts and share targetsView and setTargetStats.
import { AppError } from '#common/errors.ts';
import type { Pool } from '#common/db/pool.ts';
import { defineRoute, ok, okSchema, type RouteDef } from '#api/http/route.ts';
import { principal } from '#api/modules/auth/middleware.ts';
import { adminActor, apiKeyActor } from '#api/http/actor.ts';
import { accountParams } from '#api/http/schemas.ts';
import { subUserExists } from '#api/modules/sub-users/repo.ts';
import { readTargets, setTargetStats } from './repo.ts';
import {
  targetsQuery,
  targetsResponseSchema,
  targetStatsSchema,
  targetStatsUpdate,
  utcToday,
  type TargetsQuery,
  type TargetsResponse,
} from './schemas.ts';

/** The answer of GET .../usage/targets; undefined when the account does not exist. */
export async function targetsView(
  pool: Pool,
  accountId: string,
  query: TargetsQuery,
): Promise<TargetsResponse | undefined> {
  const date = query.date ?? utcToday();
  if (query.subUser !== undefined && !(await subUserExists(pool, accountId, query.subUser)))
    throw new AppError('SUB_USER_NOT_FOUND');
  const found = await readTargets(pool, accountId, date, query.product, query.subUser);
  return found && { success: true, date, ...found };
}

export function targetRoutes(pool: Pool): RouteDef[] {
  return [
    defineRoute<undefined, Record<string, string>, TargetsQuery>({
      method: 'get',
      path: '/usage/targets',
      tag: 'usage',
      summary: 'Bytes and requests per target domain on one day (?date=YYYY-MM-DD&product=&subUser=)',
      description:
        'Per registrable domain (never a path or a query), per product, for one UTC day of the last 30. ' +
        "Figures arrive with the gateways' usage flushes (seconds). At most 200 domains per product and " +
        'day; the rest are added up under "(other)". Empty when the account opted out. subUser: only that ' +
        "sub-user's traffic.",
      auth: 'apiKey',
      query: targetsQuery,
      response: targetsResponseSchema,
      errors: ['VALIDATION_FAILED', 'SUB_USER_NOT_FOUND'],
      handler: async ({ res, query }) => {
        const view = await targetsView(pool, principal(res).accountId, query);
        if (!view) throw new AppError('INVALID_API_KEY');
        return { body: view };
      },
    }),
    defineRoute<{ enabled: boolean }>({
      method: 'put',
      path: '/account/target-stats',
      tag: 'account',
      summary: 'Record target statistics or not (opting out deletes what is stored)',
      auth: 'apiKey',
      body: targetStatsUpdate,
      response: okSchema(targetStatsSchema),
      errors: ['VALIDATION_FAILED'],
      handler: async ({ req, res, body }) => {
        if (!(await setTargetStats(pool, principal(res).accountId, body.enabled, apiKeyActor(req, res))))
          throw new AppError('INVALID_API_KEY');
        return { body: ok({ enabled: body.enabled }) };
      },
    }),
  ];
}

/** The operator's view and switch of an account's target statistics (/admin/v1). */
export function adminTargetRoutes(pool: Pool): RouteDef[] {
  const account = { params: accountParams, paramsError: 'ACCOUNT_NOT_FOUND' as const };
  return [
    defineRoute<undefined, { id: string }, TargetsQuery>({
      method: 'get',
      path: '/accounts/:id/usage/targets',
      tag: 'admin',
      summary: 'Bytes and requests per target domain of an account on one day (?date=YYYY-MM-DD&product=)',
      auth: 'admin',
      ...account,
      query: targetsQuery,
      response: targetsResponseSchema,
      errors: ['VALIDATION_FAILED', 'ACCOUNT_NOT_FOUND', 'SUB_USER_NOT_FOUND'],
      handler: async ({ params, query }) => {
        const view = await targetsView(pool, params.id, query);
        if (!view) throw new AppError('ACCOUNT_NOT_FOUND');
        return { body: view };
      },
    }),
    defineRoute<{ enabled: boolean }, { id: string }>({
      method: 'put',
      path: '/accounts/:id/target-stats',
      tag: 'admin',
      summary: 'Record target statistics of an account or not (off deletes what is stored)',
      auth: 'admin',
      ...account,
      body: targetStatsUpdate,
      response: targetStatsSchema,
      errors: ['VALIDATION_FAILED', 'ACCOUNT_NOT_FOUND'],
      handler: async ({ params, body, req }) => {
        if (!(await setTargetStats(pool, params.id, body.enabled, adminActor(req))))
          throw new AppError('ACCOUNT_NOT_FOUND');
        return { body: { enabled: body.enabled } };
      },
    }),
  ];
}
