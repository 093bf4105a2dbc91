// POST /admin/v1/accounts: a new account with its primary API key and proxy credentials, shown once.
import type { z } from 'zod';
import { createAccount } from '#common/accounts/accounts.ts';
import { adminActor } from '#api/http/actor.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import * as s from '../schemas.ts';
import type { AdminContext } from '../context.ts';

export function createAccountRoute(ctx: AdminContext): RouteDef {
  return defineRoute<z.infer<typeof s.createAccountSchema>>({
    method: 'post',
    path: '/accounts',
    tag: 'admin',
    summary: 'Create an account with its primary API key and proxy credentials',
    auth: 'admin',
    body: s.createAccountSchema,
    response: s.newAccountSchema,
    status: 201,
    errors: ['VALIDATION_FAILED', 'EMAIL_TAKEN'],
    handler: async ({ body, req }) => {
      const created = await createAccount(
        ctx.pool,
        { email: body.email },
        ctx.credentialsKey,
        adminActor(req),
      );
      return { status: 201, body: created };
    },
  });
}
