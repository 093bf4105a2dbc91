import { defineRoute, type RouteDef } from '#api/http/route.ts';
import { principal } from '#api/modules/auth/middleware.ts';
import { accountResponseSchema } from './schemas.ts';
import type { AccountService } from './service.ts';

export function accountRoutes(accounts: AccountService): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/account',
      tag: 'account',
      summary: 'The account record',
      description:
        'Identity, status, balances, alert and auto-refill settings, and the active API keys by name and display prefix (never a key).',
      auth: 'apiKey',
      response: accountResponseSchema,
      handler: async ({ res }) => ({ json: await accounts.viewJson(principal(res).accountId) }),
    }),
  ];
}
