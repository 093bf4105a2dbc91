// GET /admin/v1/accounts: the accounts, a page at a time, optionally those of one email.
import { z } from 'zod';
import { listAccounts } from '../repo.ts';
import { defineRoute, validationError, type RouteDef } from '#api/http/route.ts';
import * as s from '../schemas.ts';
import type { AdminContext } from '../context.ts';

export function listAccountsRoute(ctx: AdminContext): RouteDef {
  return defineRoute({
    method: 'get',
    path: '/accounts',
    tag: 'admin',
    summary: 'List accounts (?limit=100&offset=0&email=)',
    auth: 'admin',
    response: z.object({ accounts: z.array(s.accountSummarySchema) }),
    handler: async ({ req }) => {
      const parsed = s.listAccountsQuery.safeParse(req.query);
      if (!parsed.success) throw validationError(parsed.error);
      const rows = await listAccounts(ctx.pool, parsed.data);
      return {
        body: {
          accounts: rows.map((r) => ({
            id: r.id,
            email: r.email,
            status: r.status,
            createdAt: r.created_at.toISOString(),
          })),
        },
      };
    },
  });
}
