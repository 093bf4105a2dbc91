// PUT /admin/v1/accounts/:id/throttle/:product: an account's bandwidth cap per product (docs/adr/0035).
import type { z } from 'zod';
import { adminActor } from '#api/http/actor.ts';
import { putThrottle } from '../repo.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import * as s from '../schemas.ts';
import type { AdminContext } from '../context.ts';

export function throttleRoute(ctx: AdminContext): RouteDef {
  return defineRoute<s.ThrottleUpdate, z.infer<typeof s.throttleParams>>({
    method: 'put',
    path: '/accounts/:id/throttle/:product',
    tag: 'admin',
    summary: "Bandwidth cap of one product in bytes per second (null: the plan's default)",
    description:
      'Shared by all connections of the account on this product, on every gateway (each enforces its ' +
      'share, cap / live gateways). Reaches live connections within a second, no restart.',
    auth: 'admin',
    params: s.throttleParams,
    body: s.throttleUpdateSchema,
    response: s.throttleResponseSchema,
    errors: ['VALIDATION_FAILED', 'ACCOUNT_NOT_FOUND'],
    handler: async ({ params, body, req }) => {
      await ctx.mustExist(params.id);
      await putThrottle(ctx.pool, params.id, params.product, body.bytesPerSecond, adminActor(req));
      return ctx.synced({ body: { product: params.product, bytesPerSecond: body.bytesPerSecond } });
    },
  });
}
