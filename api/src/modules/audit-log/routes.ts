// GET /api/v1/audit-log (the caller's own account) and GET /admin/v1/accounts/:id/audit-log
// (docs/api.md "Audit log"): who changed what on an account, newest first.
import type { z } from 'zod';
import { AppError } from '#common/errors.ts';
import type { Pool } from '#common/db/pool.ts';
import { defineRoute, ok, okSchema, type RouteDef } from '#api/http/route.ts';
import { accountParams } from '#api/http/schemas.ts';
import { principal } from '#api/modules/auth/middleware.ts';
import { readAuditLog } from './repo.ts';
import { auditLogQuery, auditLogSchema, type AuditLogQuery } from './schemas.ts';

const DESCRIPTION =
  'Every change to the account (keys, sub-users, IP allowlist, auto-refill, alerts, purchases, ' +
  'suspension, sign-ins, two-factor and more), written in the same transaction as the change; newest ' +
  'first, ?limit= (default 50, at most 200) and ?cursor= (the previous page’s nextCursor). Details never ' +
  'hold a secret. Entries are kept PROXYFLEET_AUDIT_RETENTION_DAYS (400 by default).';

export function auditLogRoutes(pool: Pool): RouteDef[] {
  return [
    defineRoute<undefined, Record<string, string>, AuditLogQuery>({
      method: 'get',
      path: '/audit-log',
      tag: 'account',
      summary: "The account's audit log, newest first",
      description: DESCRIPTION,
      auth: 'apiKey',
      query: auditLogQuery,
      response: okSchema(auditLogSchema),
      errors: ['VALIDATION_FAILED'],
      handler: async ({ res, query }) => ({
        body: ok(await readAuditLog(pool, principal(res).accountId, query)),
      }),
    }),
  ];
}

export function adminAuditLogRoutes(pool: Pool): RouteDef[] {
  return [
    defineRoute<undefined, z.infer<typeof accountParams>, AuditLogQuery>({
      method: 'get',
      path: '/accounts/:id/audit-log',
      tag: 'admin',
      summary: "An account's audit log, newest first (as GET /api/v1/audit-log)",
      description: DESCRIPTION,
      auth: 'admin',
      params: accountParams,
      paramsError: 'ACCOUNT_NOT_FOUND',
      query: auditLogQuery,
      response: auditLogSchema,
      errors: ['VALIDATION_FAILED', 'ACCOUNT_NOT_FOUND'],
      handler: async ({ params, query }) => {
        const { rowCount } = await pool.query('SELECT 1 FROM accounts WHERE id = $1', [params.id]);
        if (rowCount !== 1) throw new AppError('ACCOUNT_NOT_FOUND');
        return { body: await readAuditLog(pool, params.id, query) };
      },
    }),
  ];
}
