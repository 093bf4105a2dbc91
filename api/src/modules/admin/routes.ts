// /admin/v1: the operators' interface (docs/design.md "Interfaces that tests outside the project rely
// on"), wrapped by `npx proxyfleet admin`. Every change that API caches hold (keys, status,
// balances, settings) answers only once every API process has applied it, and says how many did
// in the Proxyfleet-Cache-Sync header.
import { z } from 'zod';
import { AppError } from '#common/errors.ts';
import { SQLSTATE, sqlState, type Pool } from '#common/db/pool.ts';
import {
  createAccount,
  resetProxyPassword,
  setAccountStatus,
  readProxyCredentials,
} from '#common/accounts/accounts.ts';
import { createNamedKey, listKeys, regeneratePrimaryKey, revokeKey } from '#common/accounts/keys.ts';
import { recordPurchase } from '#common/billing/purchases.ts';
import { gbToBytes } from '#common/products.ts';
import { newProxyPassword, seal } from '#common/secrets.ts';
import { adminActor } from '../../http/actor.ts';
import { defineRoute, validationError, type RouteDef, type RouteResult } from '../../http/route.ts';
import { toIspProxy } from '../proxies/service.ts';
import { listIspProxies } from '../proxies/repo.ts';
import { ispProxySchema } from '../proxies/schemas.ts';
import { accountParams } from '../../http/schemas.ts';
import { activeKeyKind, updateAlerts } from '../account/repo.ts';
import { alertsSchema, alertsUpdateSchema, createKeySchema, type AlertsUpdate } from '../account/schemas.ts';
import { deleteSnapshot } from '../usage/repo.ts';
import type { AccountService } from '../account/service.ts';
import type { WaitForApiCaches } from '../sync/wait.ts';
import { gb } from '../usage/service.ts';
import { createPasswordLink } from '../password-links/service.ts';
import * as s from './schemas.ts';
import { accountExists, deleteIspProxy, insertIspProxy, listAccounts, putThrottle } from './repo.ts';
import { autoRefillUpdateSchema, putAutoRefill, type AutoRefillUpdate } from '#common/billing/auto-refill.ts';

export interface AdminDeps {
  pool: Pool;
  credentialsKey: Buffer;
  accounts: AccountService;
  waitForApiCaches: WaitForApiCaches;
  /** Base URL of invite links: configuration only, never a request header (docs/security.md). */
  linkBase: () => string;
}

type IdParams = z.infer<typeof accountParams>;

export function adminRoutes(deps: AdminDeps): RouteDef[] {
  const { pool } = deps;
  /** Answers once every API process applied the change. */
  const synced = async (result: RouteResult): Promise<RouteResult> => {
    const sync = await deps.waitForApiCaches();
    return {
      ...result,
      headers: { ...result.headers, 'Proxyfleet-Cache-Sync': `${sync.synced}/${sync.total}` },
    };
  };
  const mustExist = async (id: string) => {
    if (!(await accountExists(pool, id))) throw new AppError('ACCOUNT_NOT_FOUND');
  };
  const account = { params: accountParams, paramsError: 'ACCOUNT_NOT_FOUND' as const };
  const tag = 'admin';

  return [
    defineRoute<z.infer<typeof s.createAccountSchema>>({
      method: 'post',
      path: '/accounts',
      tag,
      summary: 'Create an account with its primary API key and proxy credentials',
      auth: 'admin',
      body: s.createAccountSchema,
      response: s.newAccountSchema,
      status: 201,
      errors: ['VALIDATION_FAILED', 'EMAIL_TAKEN'],
      handler: async ({ body, req }) => {
        const created = await createAccount(
          pool,
          { email: body.email },
          deps.credentialsKey,
          adminActor(req),
        );
        return { status: 201, body: created };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/accounts',
      tag,
      summary: 'List accounts (?limit=100&offset=0&email=)',
      auth: 'admin',
      response: z.object({ accounts: z.array(s.accountSummarySchema) }),
      handler: async ({ req }) => {
        const parsed = s.listAccountsQuery.safeParse(req.query);
        if (!parsed.success) throw validationError(parsed.error);
        const rows = await listAccounts(pool, parsed.data);
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
    }),
    defineRoute<undefined, IdParams>({
      method: 'get',
      path: '/accounts/:id',
      tag,
      summary: 'One account: the record its owner sees at GET /api/v1/account',
      auth: 'admin',
      ...account,
      errors: ['ACCOUNT_NOT_FOUND'],
      handler: async ({ params }) => {
        const { success: _, ...view } = await deps.accounts.view(params.id);
        return { body: view };
      },
    }),
    defineRoute<s.PurchaseRequest, IdParams>({
      method: 'post',
      path: '/accounts/:id/purchases',
      tag,
      summary: 'Buy bandwidth (fractional GB allowed); issues an invoice',
      auth: 'admin',
      ...account,
      body: s.purchaseSchema,
      response: s.invoiceSchema,
      status: 201,
      errors: ['VALIDATION_FAILED', 'ACCOUNT_NOT_FOUND', 'IDEMPOTENCY_KEY_REUSED'],
      handler: async ({ params, body, req }) => {
        const idempotencyKey = body.idempotencyKey ?? req.get('Idempotency-Key');
        const invoice = await recordPurchase(pool, {
          accountId: params.id,
          product: body.product,
          bytes: gbToBytes(body.gb),
          ...(idempotencyKey ? { idempotencyKey } : {}),
          actor: adminActor(req),
        });
        await deleteSnapshot(pool, params.id);
        return synced({
          status: 201,
          body: { ...invoice, gb: gb(invoice.bytes), issuedAt: invoice.issuedAt.toISOString() },
        });
      },
    }),
    defineRoute<undefined, IdParams>({
      method: 'post',
      path: '/accounts/:id/dashboard-invite',
      tag,
      summary: 'A one-time link to set the dashboard password (also emailed to the account)',
      auth: 'admin',
      ...account,
      response: s.dashboardInviteSchema,
      status: 201,
      errors: ['ACCOUNT_NOT_FOUND'],
      handler: async ({ params, req }) => {
        // Audited: the link sets the account's password (never the link itself in the entry).
        const link = await createPasswordLink(pool, params.id, 'invite', deps.linkBase(), {
          actor: adminActor(req),
          action: 'password.invited',
        });
        return { status: 201, body: { url: link.url, expiresAt: link.expiresAt.toISOString() } };
      },
    }),
    defineRoute<undefined, IdParams>({
      method: 'get',
      path: '/accounts/:id/keys',
      tag,
      summary: "The account's API keys, revoked ones included (never the keys themselves)",
      auth: 'admin',
      ...account,
      response: z.object({ keys: z.array(s.keyRecordSchema) }),
      errors: ['ACCOUNT_NOT_FOUND'],
      handler: async ({ params }) => {
        await mustExist(params.id);
        const keys = await listKeys(pool, params.id);
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
    }),
    defineRoute<undefined, IdParams>({
      method: 'post',
      path: '/accounts/:id/keys/primary/regenerate',
      tag,
      summary: 'Replace the primary key; the old one stops working on every API server before this returns',
      auth: 'admin',
      ...account,
      response: s.createdKeySchema,
      errors: ['ACCOUNT_NOT_FOUND'],
      handler: async ({ params, req }) => {
        const key = await regeneratePrimaryKey(pool, params.id, undefined, adminActor(req));
        return synced({ body: key });
      },
    }),
    defineRoute<z.infer<typeof createKeySchema>, IdParams>({
      method: 'post',
      path: '/accounts/:id/keys',
      tag,
      summary: 'Create a named key (at most 10 active per account)',
      auth: 'admin',
      ...account,
      body: createKeySchema,
      response: s.createdKeySchema,
      status: 201,
      errors: ['VALIDATION_FAILED', 'ACCOUNT_NOT_FOUND', 'NAMED_KEY_LIMIT', 'KEY_NAME_TAKEN'],
      handler: async ({ params, body, req }) => {
        const key = await createNamedKey(pool, params.id, body.name, undefined, adminActor(req));
        return { status: 201, body: key };
      },
    }),
    defineRoute<undefined, z.infer<typeof s.keyParams>>({
      method: 'delete',
      path: '/accounts/:id/keys/:keyId',
      tag,
      summary: 'Revoke a named key; it stops working on every API server before this returns',
      auth: 'admin',
      params: s.keyParams,
      paramsError: 'KEY_NOT_FOUND',
      status: 204,
      errors: ['KEY_NOT_FOUND', 'PRIMARY_KEY_NOT_REVOCABLE'],
      handler: async ({ params, req }) => {
        const kind = await activeKeyKind(pool, params.id, params.keyId);
        if (!kind) throw new AppError('KEY_NOT_FOUND');
        if (kind === 'primary') throw new AppError('PRIMARY_KEY_NOT_REVOCABLE');
        if (!(await revokeKey(pool, params.id, params.keyId, adminActor(req))))
          throw new AppError('KEY_NOT_FOUND');
        return synced({ status: 204 });
      },
    }),
    ...(['suspend', 'reactivate'] as const).map((action) =>
      defineRoute<undefined, IdParams>({
        method: 'post',
        path: `/accounts/:id/${action}`,
        tag,
        summary:
          action === 'suspend'
            ? 'Suspend: every API key of the account is refused (401) on every API server before this returns'
            : 'Reactivate a suspended account',
        auth: 'admin',
        ...account,
        response: s.statusSchema,
        errors: ['ACCOUNT_NOT_FOUND'],
        handler: async ({ params, req }) => {
          const status = action === 'suspend' ? 'suspended' : 'active';
          if (!(await setAccountStatus(pool, params.id, status, adminActor(req))))
            throw new AppError('ACCOUNT_NOT_FOUND');
          return synced({ body: { id: params.id, status } });
        },
      }),
    ),
    defineRoute<AlertsUpdate, IdParams>({
      method: 'put',
      path: '/accounts/:id/alerts',
      tag,
      summary: 'Switch email alerts on or off (fields not given keep their value)',
      auth: 'admin',
      ...account,
      body: alertsUpdateSchema,
      response: alertsSchema,
      errors: ['VALIDATION_FAILED', 'ACCOUNT_NOT_FOUND'],
      handler: async ({ params, body, req }) => {
        const alerts = await updateAlerts(pool, params.id, body, adminActor(req));
        if (!alerts) throw new AppError('ACCOUNT_NOT_FOUND');
        return synced({ body: alerts });
      },
    }),
    defineRoute<AutoRefillUpdate, z.infer<typeof s.autoRefillParams>>({
      method: 'put',
      path: '/accounts/:id/auto-refill/:product',
      tag,
      summary: 'Auto-refill settings of one product (as PUT /api/v1/auto-refill/:product)',
      auth: 'admin',
      params: s.autoRefillParams,
      body: autoRefillUpdateSchema,
      errors: ['VALIDATION_FAILED', 'ACCOUNT_NOT_FOUND'],
      handler: async ({ params, body, req }) => {
        await mustExist(params.id);
        await putAutoRefill(pool, params.id, params.product, body, undefined, adminActor(req));
        return synced({ body: { product: params.product, ...body } });
      },
    }),
    defineRoute<s.ThrottleUpdate, z.infer<typeof s.throttleParams>>({
      method: 'put',
      path: '/accounts/:id/throttle/:product',
      tag,
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
        await mustExist(params.id);
        await putThrottle(pool, params.id, params.product, body.bytesPerSecond, adminActor(req));
        return synced({ body: { product: params.product, bytesPerSecond: body.bytesPerSecond } });
      },
    }),
    defineRoute<undefined, IdParams>({
      method: 'post',
      path: '/accounts/:id/proxy-password/reset',
      tag,
      summary: 'Issue a new proxy password; the old one stops working on the gateways',
      auth: 'admin',
      ...account,
      response: s.proxyPasswordSchema,
      errors: ['ACCOUNT_NOT_FOUND'],
      handler: async ({ params, req }) => {
        const proxyPassword = await resetProxyPassword(pool, params.id, deps.credentialsKey, adminActor(req));
        const { username } = await readProxyCredentials(pool, params.id, deps.credentialsKey);
        return synced({ body: { proxyUsername: username, proxyPassword } });
      },
    }),
    defineRoute<s.CreateIspProxy, IdParams>({
      method: 'post',
      path: '/accounts/:id/isp-proxies',
      tag,
      summary: 'Assign a static ISP proxy to the account',
      auth: 'admin',
      ...account,
      body: s.createIspProxySchema,
      response: ispProxySchema,
      status: 201,
      errors: ['VALIDATION_FAILED', 'ACCOUNT_NOT_FOUND', 'ISP_PROXY_EXISTS'],
      handler: async ({ params, body, req }) => {
        await mustExist(params.id);
        const { password, ...rest } = body;
        try {
          const row = await insertIspProxy(
            pool,
            params.id,
            { ...rest, passwordEnc: seal(deps.credentialsKey, password ?? newProxyPassword()) },
            adminActor(req),
          );
          return { status: 201, body: toIspProxy(row, deps.credentialsKey) };
        } catch (err) {
          if (sqlState(err) === SQLSTATE.UNIQUE_VIOLATION) throw new AppError('ISP_PROXY_EXISTS');
          if (sqlState(err) === SQLSTATE.FOREIGN_KEY_VIOLATION) throw new AppError('ACCOUNT_NOT_FOUND');
          throw err;
        }
      },
    }),
    defineRoute<undefined, IdParams>({
      method: 'get',
      path: '/accounts/:id/isp-proxies',
      tag,
      summary: "The account's ISP proxies, as GET /api/v1/proxies/list shows them",
      auth: 'admin',
      ...account,
      response: z.object({ proxies: z.array(ispProxySchema) }),
      errors: ['ACCOUNT_NOT_FOUND'],
      handler: async ({ params }) => {
        await mustExist(params.id);
        const rows = await listIspProxies(pool, params.id);
        return { body: { proxies: rows.map((r) => toIspProxy(r, deps.credentialsKey)) } };
      },
    }),
    defineRoute<undefined, z.infer<typeof s.ispProxyParams>>({
      method: 'delete',
      path: '/accounts/:id/isp-proxies/:proxyId',
      tag,
      summary: 'Remove an ISP proxy from the account',
      auth: 'admin',
      params: s.ispProxyParams,
      paramsError: 'ISP_PROXY_NOT_FOUND',
      status: 204,
      errors: ['ISP_PROXY_NOT_FOUND'],
      handler: async ({ params, req }) => {
        if (!(await deleteIspProxy(pool, params.id, params.proxyId, adminActor(req))))
          throw new AppError('ISP_PROXY_NOT_FOUND');
        return { status: 204 };
      },
    }),
  ];
}
