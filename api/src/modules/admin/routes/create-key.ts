// POST /admin/v1/accounts/:id/keys: a named key (at most 10 active per account).
import type { z } from 'zod';
import { createNamedKey } from '#common/accounts/keys.ts';
import { adminActor } from '#api/http/actor.ts';
import { createKeySchema } from '#api/modules/account/schemas.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import * as s from '../schemas.ts';
import { type AdminContext, type IdParams, oneAccount } from '../context.ts';

export function createKeyRoute(ctx: AdminContext): RouteDef {
  return defineRoute<z.infer<typeof createKeySchema>, IdParams>({
    method: 'post',
    path: '/accounts/:id/keys',
    tag: 'admin',
    summary: 'Create a named key (at most 10 active per account)',
    auth: 'admin',
    ...oneAccount,
    body: createKeySchema,
    response: s.createdKeySchema,
    status: 201,
    errors: ['VALIDATION_FAILED', 'ACCOUNT_NOT_FOUND', 'NAMED_KEY_LIMIT', 'KEY_NAME_TAKEN'],
    handler: async ({ params, body, req }) => {
      const key = await createNamedKey(ctx.pool, params.id, body.name, undefined, adminActor(req));
      return { status: 201, body: key };
    },
  });
}
