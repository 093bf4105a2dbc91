// DELETE /admin/v1/accounts/:id/keys/:keyId: a named key revoked; the primary key only regenerates.
import type { z } from 'zod';
import { AppError } from '#common/errors.ts';
import { revokeKey } from '#common/accounts/keys.ts';
import { adminActor } from '#api/http/actor.ts';
import { activeKeyKind } from '#api/modules/account/repo.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import * as s from '../schemas.ts';
import type { AdminContext } from '../context.ts';

export function revokeKeyRoute(ctx: AdminContext): RouteDef {
  return defineRoute<undefined, z.infer<typeof s.keyParams>>({
    method: 'delete',
    path: '/accounts/:id/keys/:keyId',
    tag: 'admin',
    summary: 'Revoke a named key; it stops working on every API server before this returns',
    auth: 'admin',
    params: s.keyParams,
    paramsError: 'KEY_NOT_FOUND',
    status: 204,
    errors: ['KEY_NOT_FOUND', 'PRIMARY_KEY_NOT_REVOCABLE'],
    handler: async ({ params, req }) => {
      const kind = await activeKeyKind(ctx.pool, params.id, params.keyId);
      if (!kind) throw new AppError('KEY_NOT_FOUND');
      if (kind === 'primary') throw new AppError('PRIMARY_KEY_NOT_REVOCABLE');
      if (!(await revokeKey(ctx.pool, params.id, params.keyId, adminActor(req))))
        throw new AppError('KEY_NOT_FOUND');
      return ctx.synced({ status: 204 });
    },
  });
}
