// POST /admin/v1/accounts/:id/two-factor/reset (docs/api.md "Admin API"): an operator turns off a
// locked-out customer's two-factor sign-in; the customer signs in with the password alone and can
// turn it on again on the Security page (docs/security.md "Two-factor sign-in and sessions").
import { z } from 'zod';
import { AppError } from '#common/errors.ts';
import type { Pool } from '#common/db/pool.ts';
import { adminActor } from '#api/http/actor.ts';
import { defineRoute, type RouteDef } from '#api/http/route.ts';
import { accountParams } from '#api/http/schemas.ts';
import { resetTwoFactor } from './service.ts';

const resetResponse = z.object({
  accountId: z.string().uuid(),
  twoFactorEnabled: z.literal(false),
  wasEnabled: z.boolean().describe('Two-factor sign-in was on before the reset'),
});

export function adminTwoFactorRoutes(pool: Pool): RouteDef[] {
  return [
    defineRoute<undefined, z.infer<typeof accountParams>>({
      method: 'post',
      path: '/accounts/:id/two-factor/reset',
      tag: 'admin',
      summary: "Turn off the account's two-factor sign-in (a customer who lost their second factor)",
      description:
        'Removes the TOTP secret, the recovery codes and any sign-in waiting for a code; the customer ' +
        'then signs in with the password alone. Idempotent: wasEnabled says whether it was on. Audited ' +
        'as two_factor.reset.',
      auth: 'admin',
      params: accountParams,
      paramsError: 'ACCOUNT_NOT_FOUND',
      response: resetResponse,
      errors: ['ACCOUNT_NOT_FOUND'],
      handler: async ({ params, req }) => {
        const reset = await resetTwoFactor(pool, params.id, adminActor(req));
        if (!reset) throw new AppError('ACCOUNT_NOT_FOUND');
        return { body: { accountId: params.id, twoFactorEnabled: false as const, ...reset } };
      },
    }),
  ];
}
