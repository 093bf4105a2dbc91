// PUT /admin/v1/accounts/:id/auto-refill/:product: as the customer's PUT /api/v1/auto-refill/:product.
import type { z } from 'zod';
import { autoRefillUpdateSchema, putAutoRefill, type AutoRefillUpdate } from '#common/billing/auto-refill.ts';
import { adminActor } from '#api/http/actor.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import * as s from '../schemas.ts';
import type { AdminContext } from '../context.ts';

export function autoRefillRoute(ctx: AdminContext): RouteDef {
  return defineRoute<AutoRefillUpdate, z.infer<typeof s.autoRefillParams>>({
    method: 'put',
    path: '/accounts/:id/auto-refill/:product',
    tag: 'admin',
    summary: 'Auto-refill settings of one product (as PUT /api/v1/auto-refill/:product)',
    auth: 'admin',
    params: s.autoRefillParams,
    body: autoRefillUpdateSchema,
    errors: ['VALIDATION_FAILED', 'ACCOUNT_NOT_FOUND'],
    handler: async ({ params, body, req }) => {
      await ctx.mustExist(params.id);
      await putAutoRefill(ctx.pool, params.id, params.product, body, undefined, adminActor(req));
      return ctx.synced({ body: { product: params.product, ...body } });
    },
  });
}
