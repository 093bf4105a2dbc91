// GET /admin/v1/accounts/:id/keys: the account's API keys, revoked ones included, never the keys.
import { z } from 'zod';
import { listKeys } from '#common/accounts/keys.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import * as s from '../schemas.ts';
import { type AdminContext, type IdParams, oneAccount } from '../context.ts';

export function listKeysRoute(ctx: AdminContext): RouteDef {
  return defineRoute<undefined, IdParams>({
    method: 'get',
    path: '/accounts/:id/keys',
    tag: 'admin',
    summary: "The account's API keys, revoked ones included (never the keys themselves)",
    auth: 'admin',
    ...oneAccount,
    response: z.object({ keys: z.array(s.keyRecordSchema) }),
    errors: ['ACCOUNT_NOT_FOUND'],
    handler: async ({ params }) => {
      await ctx.mustExist(params.id);
      const keys = await listKeys(ctx.pool, params.id);
      return {
        body: {
          keys: keys.map((k) => ({
            ...k,
            createdAt: k.createdAt.toISOString(),
            revokedAt: k.revokedAt?.toISOString() ?? null,
            lastUsedAt: k.lastUsedAt?.toISOString() ?? null,
          })),
        },
      };
    },
  });
}
